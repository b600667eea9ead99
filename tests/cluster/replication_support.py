"""A stand-in for the local log that PartitionReplication reads: offsets only, with the real leader-epoch
cache of kcoord.storage (in a temporary directory), fed as a Kafka log feeds it."""
from __future__ import annotations

from kcoord.cluster.partition_state import PartitionRegistration
from kcoord.cluster.replica_state import PartitionReplication
from kcoord.storage.fs import FS
from kcoord.storage.leader_epochs import LeaderEpochCache


class FakeLog:
    def __init__(self, directory, entries=(), log_end_offset=0):
        self.log_start_offset = 0
        self.log_end_offset = log_end_offset
        self.leader_epochs = LeaderEpochCache(FS(), str(directory))
        for epoch, start in entries:
            self.leader_epochs.assign(epoch, start)

    def append(self, count: int, epoch: int) -> int:
        """`count` records written in `epoch` (as leader or follower): the cache learns where it began.
        Returns the required offset of an acks=all produce (last offset + 1)."""
        self.leader_epochs.assign(epoch, self.log_end_offset)
        self.log_end_offset += count
        return self.log_end_offset

    def truncate_to(self, offset: int) -> None:
        if offset < self.log_end_offset:
            self.log_end_offset = offset
            self.leader_epochs.truncate_from_end(offset)


def registration(replicas=(1, 2, 3), isr=None, leader=1, leader_epoch=0, partition_epoch=0):
    return PartitionRegistration(replicas=tuple(replicas), isr=tuple(replicas if isr is None else isr),
                                 leader=leader, leader_epoch=leader_epoch, partition_epoch=partition_epoch)


def leader(directory, reg=None, *, now=0, log_end_offset=0, entries=(), **config) -> PartitionReplication:
    """Broker 1 leading `reg`, its log already holding the epoch's entry at its end (makeLeader's
    maybeAssignEpochStartOffset, which the caller does)."""
    reg = reg or registration()
    log = FakeLog(directory, entries, log_end_offset)
    log.leader_epochs.assign(reg.leader_epoch, log_end_offset)
    part = PartitionReplication(reg.leader, log, **config)
    part.make_leader(reg, now)
    return part
