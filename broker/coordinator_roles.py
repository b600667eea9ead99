"""Coordinator elections from partition roles (issue #27): GroupCoordinatorService.onElection /
onResignation and their transaction twins, driven by the node's role changes.

Kafka 4's BrokerMetadataPublisher turns each metadata delta's local changes for `__consumer_offsets`,
`__transaction_state` and `__share_group_state` into `onElection(partition, leaderEpoch)` for the
partitions this broker now leads and `onResignation(partition, leaderEpoch)` for the ones it stopped
leading. Here the node's role changes (kcoord.cluster.metadata_image.RoleChange) arrive in
BrokerReplicas.apply, after the ReplicaManager took them, and are handed to `CoordinatorRoles.apply`.

Each coordinator registers the internal topic it lives on with a `CoordinatorElection` listener. The
listener is called once per term: a BecomeLeader repeated for the same leader epoch (an ISR change) is not
a new election, and an election at an epoch lower than one already seen for the partition is stale and
ignored, as the runtime's scheduleLoadOperation ignores an older epoch. A lease loss (every role dropped
at once) resigns every partition this node coordinates.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from kcoord.cluster.metadata_image import BecomeFollower, BecomeLeader, RoleChange, StopReplica


class CoordinatorElection(Protocol):
    """A coordinator that follows the leadership of its internal topic's partitions."""

    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This node now leads `partition` at `leader_epoch`: load the shard (serving once loaded)."""
        ...

    def on_resignation(self, partition: int, leader_epoch: int | None) -> None:
        """This node stopped leading `partition` (None: the epoch is unknown, as after a lease loss or a
        StopReplica): unload the shard; its groups / transactional ids answer NOT_COORDINATOR."""
        ...


class CoordinatorRoles:
    """Which coordinator partitions this node leads, and at which epoch; tells each topic's listener."""

    def __init__(self) -> None:
        self._listeners: dict[str, CoordinatorElection] = {}
        self._led: dict[tuple[str, int], int] = {}       # (topic, partition) -> leader epoch while led here
        self._last_epoch: dict[tuple[str, int], int] = {}  # highest leader epoch seen, to drop stale terms

    def register(self, topic: str, listener: CoordinatorElection) -> None:
        self._listeners[topic] = listener

    def apply(self, changes: Iterable[RoleChange]) -> None:
        for change in changes:
            topic, partition = change.tp.topic, change.tp.partition
            listener = self._listeners.get(topic)
            if listener is None:
                continue
            key = (topic, partition)
            if isinstance(change, BecomeLeader):
                if change.leader_epoch < self._last_epoch.get(key, -1):
                    continue  # a stale election
                self._last_epoch[key] = change.leader_epoch
                if self._led.get(key) == change.leader_epoch:
                    continue  # same term (an ISR change): not a new election
                if key in self._led:  # a new term without a resignation in between: unload, then load
                    listener.on_resignation(partition, self._led.pop(key))
                self._led[key] = change.leader_epoch
                listener.on_election(partition, change.leader_epoch)
            elif isinstance(change, BecomeFollower):
                self._last_epoch[key] = max(self._last_epoch.get(key, -1), change.leader_epoch)
                if key in self._led:
                    del self._led[key]
                    listener.on_resignation(partition, change.leader_epoch)
            elif isinstance(change, StopReplica) and key in self._led:
                del self._led[key]
                listener.on_resignation(partition, None)

    def resign_all(self) -> None:
        """Every role dropped at once (the lease was lost): resign every partition led here."""
        led, self._led = self._led, {}
        for (topic, partition) in sorted(led):
            listener = self._listeners.get(topic)
            if listener is not None:
                listener.on_resignation(partition, None)
