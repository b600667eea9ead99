"""SharePartition with an injected clock: exact in-flight state and the exact records each change writes.

Kafka source followed: core/src/main/java/kafka/server/share/SharePartition.java (4.2), InFlightState
(server/src/main/java/org/apache/kafka/server/share/fetch/InFlightState.java) and, for the records,
share-coordinator/.../ShareCoordinatorShard.java (generateShareStateRecord, replay).
"""
from __future__ import annotations

import uuid

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.share import records as r
from kcoord.share.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    REJECT,
    RELEASE,
    RENEW,
    AcquiredRecords,
    ShareConfig,
    SharePartition,
)

T = uuid.UUID(int=7)
LOCK = 30_000


class Ctx:
    """A share-partition, a clock and the log its writes went to (written, then replayed)."""

    def __init__(self, config: ShareConfig = ShareConfig(), start: int = 0) -> None:
        self.now = 0
        self.config = config
        self.sp = SharePartition("g", T, 0, config)
        self.log: list = []
        self.write(self.sp.initialize("earliest", start, 1000, self.now))

    def write(self, records) -> list:
        for record in records:
            self.log.append(record)
            self.sp.replay(record)
        return [r.decoded(record) for record in records]

    def acquire(self, member, batches, max_records=500, **kw):
        got = self.sp.acquire(member, batches, max_records, self.now, **kw)
        self.write(got.records)
        return got.acquired

    def ack(self, member, *batches):
        out = self.sp.acknowledge(member, list(batches), self.now)
        return out.error, self.write(out.records)

    def reload(self) -> SharePartition:
        return SharePartition.load("g", T, 0, [(k, v) for k, v, _ in self.log], self.config)


def update(start, *batches, complete):
    return r.ShareStateRecord(r.SHARE_UPDATE, "g", T, 0, 0, 0, start, tuple(r.StateBatch(*b) for b in batches),
                              complete)


def test_acquire_then_accept_moves_the_start_offset():
    """SharePartition.acquire (acquireNewBatchRecords: a fetched batch is acquired whole, delivery count 1,
    a lock of group.share.record.lock.duration.ms) and acknowledge with ACCEPT; the start offset moves past
    the acknowledged prefix (maybeUpdateCachedStateAndOffsets / findLastOffsetAcknowledged)."""
    c = Ctx()
    assert c.acquire("m1", [(0, 4), (5, 9)], max_records=3) == [AcquiredRecords(0, 4, 1)]
    assert c.sp.state_of(2) == (ACQUIRED, 1, "m1", LOCK)
    assert (c.sp.start_offset, c.sp.end_offset) == (0, 5)
    assert c.ack("m1", (3, 3, [ACCEPT])) == (ErrorCode.NONE, [update(0, (3, 3, ACKNOWLEDGED, 1), complete=1)])
    assert c.ack("m1", (0, 2, [ACCEPT])) == (ErrorCode.NONE, [update(4, complete=0)])
    assert (c.sp.start_offset, c.sp.end_offset, c.sp.in_flight()) == (4, 5, {4: (ACQUIRED, 1, "m1", LOCK)})


def test_release_redelivers_with_delivery_count_2_to_another_member():
    """AcknowledgeType RELEASE: the offsets go back to AVAILABLE with their delivery count
    (InFlightState.tryUpdateState, DeliveryCountOps.NO_OP); nextFetchOffset points at them and the next
    acquire, by any member, delivers them again with the count incremented."""
    c = Ctx()
    c.acquire("m1", [(0, 4)])
    assert c.ack("m1", (0, 4, [RELEASE])) == (ErrorCode.NONE, [update(0, (0, 4, AVAILABLE, 1), complete=0)])
    assert c.sp.next_fetch_offset() == 0
    assert c.acquire("m2", [(0, 4), (5, 6)]) == [AcquiredRecords(0, 4, 2), AcquiredRecords(5, 6, 1)]
    assert c.sp.state_of(0) == (ACQUIRED, 2, "m2", LOCK)


def test_reject_is_never_delivered_again():
    """AcknowledgeType REJECT archives (fetchRecordState: REJECT -> ARCHIVED); per-offset acknowledge
    types split the batch (acknowledgePerOffsetBatchRecords); a later acquire skips ARCHIVED offsets."""
    c = Ctx()
    c.acquire("m1", [(0, 4)])
    assert c.ack("m1", (0, 4, [ACCEPT, ACCEPT, REJECT, RELEASE, RELEASE])) == \
        (ErrorCode.NONE, [update(3, (3, 4, AVAILABLE, 1), complete=0)])
    assert c.acquire("m2", [(0, 4)]) == [AcquiredRecords(3, 4, 2)]
    c.ack("m2", (3, 3, [REJECT]), (4, 4, [RELEASE]))
    assert c.acquire("m1", [(3, 4)]) == [AcquiredRecords(4, 4, 3)]


def test_lock_expiry_makes_records_available_again():
    """SharePartition.releaseAcquisitionLockOnTimeout: at the lock deadline ACQUIRED offsets become
    AVAILABLE (delivery count kept) and the state is written; the former owner's acknowledgement then
    fails with INVALID_RECORD_STATE (KIP-932: "the attempt to acknowledge it will fail")."""
    c = Ctx()
    c.acquire("m1", [(0, 4)])
    assert c.sp.next_lock_deadline() == LOCK
    assert c.sp.expire_locks(LOCK - 1).records == []
    c.now = LOCK
    assert c.write(c.sp.expire_locks(c.now).records) == [update(0, (0, 4, AVAILABLE, 1), complete=0)]
    assert c.ack("m1", (0, 4, [ACCEPT])) == (ErrorCode.INVALID_RECORD_STATE, [])
    assert c.acquire("m2", [(0, 4)]) == [AcquiredRecords(0, 4, 2)]
    assert c.sp.state_of(0) == (ACQUIRED, 2, "m2", 2 * LOCK)


def test_delivery_limit_archives():
    """group.share.delivery.count.limit: a release or lock expiry of an offset delivered that many times
    archives it (InFlightState.tryUpdateState: AVAILABLE with deliveryCount >= maxDeliveryCount -> ARCHIVED),
    and the start offset moves past it."""
    c = Ctx(ShareConfig(delivery_count_limit=2))
    c.acquire("m1", [(0, 1)])
    c.ack("m1", (0, 1, [RELEASE]))
    c.acquire("m2", [(0, 1)])
    assert c.ack("m2", (0, 0, [RELEASE])) == (ErrorCode.NONE, [update(1, complete=0)])
    assert c.sp.start_offset == 1
    c.now = LOCK
    assert c.write(c.sp.expire_locks(c.now).records) == [update(2, complete=0)]
    assert c.acquire("m1", [(0, 1)]) == []


def test_max_record_locks_bounds_the_window():
    """group.share.partition.max.record.locks: canAcquireRecords is false while the window holds that many
    offsets and no redelivery is pending; acquire takes no more new offsets than the room left."""
    c = Ctx(ShareConfig(max_record_locks=10))
    one_record_batches = [(o, o) for o in range(0, 100)]
    assert c.acquire("m1", one_record_batches) == [AcquiredRecords(0, 9, 1)]
    assert not c.sp.can_acquire()
    assert c.acquire("m2", one_record_batches[10:]) == []
    c.ack("m1", (0, 4, [ACCEPT]))
    assert c.sp.can_acquire()
    assert c.acquire("m2", one_record_batches[10:]) == [AcquiredRecords(10, 14, 1)]


def test_record_limit_mode_is_strict():
    """ShareAcquireMode.RECORD_LIMIT (ShareFetch v2): exactly max records, even inside one log batch."""
    c = Ctx()
    assert c.acquire("m1", [(0, 99)], max_records=3, strict=True) == [AcquiredRecords(0, 2, 1)]
    assert c.acquire("m2", [(0, 99)], max_records=3, strict=True) == [AcquiredRecords(3, 5, 1)]


def test_member_release_gives_back_only_its_records():
    """SharePartition.releaseAcquiredRecords(memberId) (share session closed / member left): the member's
    ACQUIRED offsets become AVAILABLE with the delivery count taken back (DeliveryCountOps.DECREASE,
    KAFKA-17541: fetched but not delivered); other members' locks are untouched."""
    c = Ctx()
    c.acquire("m1", [(0, 4)])
    c.acquire("m2", [(5, 9)])
    assert c.write(c.sp.release_member("m1", c.now).records) == [update(0, (0, 4, AVAILABLE, 0), complete=0)]
    assert c.sp.state_of(5) == (ACQUIRED, 1, "m2", LOCK)
    assert c.acquire("m3", [(0, 9)]) == [AcquiredRecords(0, 4, 1)]


def test_start_offset_waits_for_the_first_unacknowledged_offset():
    """canMoveStartOffset: the start offset moves only when the offset at it is ACKNOWLEDGED/ARCHIVED."""
    c = Ctx()
    c.acquire("m1", [(0, 9)])
    assert c.ack("m1", (2, 9, [ACCEPT])) == \
        (ErrorCode.NONE, [update(0, (2, 9, ACKNOWLEDGED, 1), complete=8)])
    assert c.sp.start_offset == 0
    assert c.ack("m1", (0, 1, [REJECT])) == (ErrorCode.NONE, [update(10, complete=0)])
    assert (c.sp.start_offset, c.sp.end_offset, c.sp.in_flight()) == (10, 10, {})


def test_crash_acknowledged_are_not_redelivered_acquired_are():
    """The persister keeps only what was written (KIP-932: ACQUIRED is never recorded); a share-partition
    loaded from the records (SharePartition.maybeInitialize over ReadShareGroupState) never delivers an
    acknowledged offset again, and delivers the acquired-but-unacknowledged ones again."""
    c = Ctx()
    c.acquire("m1", [(0, 9)])
    c.ack("m1", (0, 4, [ACCEPT]))
    c.ack("m1", (7, 7, [RELEASE]))
    c.acquire("m2", [(7, 7)])  # delivery count 2, not written
    loaded = c.reload()
    assert loaded.durable.summary() == c.sp.durable.summary()
    assert (loaded.start_offset, loaded.end_offset) == (5, 8)
    assert loaded.in_flight() == {5: (AVAILABLE, 0, None, None), 6: (AVAILABLE, 0, None, None),
                                  7: (AVAILABLE, 1, None, None)}
    got = loaded.acquire("m3", [(0, 9)], 500, 0)
    assert got.acquired == [AcquiredRecords(5, 6, 1), AcquiredRecords(7, 7, 2), AcquiredRecords(8, 9, 1)]


def test_read_committed_archives_aborted_transactions():
    """share.isolation.level=read_committed (SharePartition.maybeFilterAbortedTransactionalAcquiredRecords):
    offsets of aborted transactions are archived, never acquired, and the archive is written."""
    c = Ctx()
    got = c.sp.acquire("m1", [(0, 9)], 500, c.now, aborted=[(0, 1), (5, 6)])
    assert got.acquired == [AcquiredRecords(2, 4, 1), AcquiredRecords(7, 9, 1)]
    assert c.write(got.records) == [update(2, (5, 6, ARCHIVED, 0), complete=2)]
    assert c.sp.state_of(5) == (ARCHIVED, 0, None, None)
    assert c.ack("m1", (2, 9, [RELEASE]))[0] == ErrorCode.INVALID_RECORD_STATE  # 5-6 were never acquired
    assert c.ack("m1", (2, 4, [RELEASE]), (7, 9, [RELEASE]))[0] == ErrorCode.NONE
    assert c.acquire("m2", [(0, 9)], aborted=[(0, 1), (5, 6)]) == [AcquiredRecords(2, 4, 2),
                                                                    AcquiredRecords(7, 9, 2)]


def test_renew_extends_the_lock():
    """AcknowledgeType RENEW (KIP-1222, ShareAcknowledge/ShareFetch v2): the offsets stay ACQUIRED by the
    member with a lock of a full duration from now; nothing is written."""
    c = Ctx()
    c.acquire("m1", [(0, 4)])
    c.now = 20_000
    assert c.ack("m1", (0, 4, [RENEW])) == (ErrorCode.NONE, [])
    assert c.sp.state_of(0) == (ACQUIRED, 1, "m1", 20_000 + LOCK)
    assert c.sp.expire_locks(LOCK).records == []
    assert c.write(c.sp.expire_locks(20_000 + LOCK).records) == [update(0, (0, 4, AVAILABLE, 1), complete=0)]
    assert c.sp.state_of(0) == (AVAILABLE, 1, None, None)


@pytest.mark.parametrize("batches, error", [
    ([(0, 4, [7])], ErrorCode.INVALID_REQUEST),                  # unknown acknowledge type
    ([(0, 4, [1, 1])], ErrorCode.INVALID_REQUEST),               # types do not fit the range
    ([(3, 12, [1])], ErrorCode.INVALID_REQUEST),                 # past the acquired records
    ([(0, 1, [1]), (5, 5, [1])], ErrorCode.INVALID_RECORD_STATE),  # 5 is m2's: all or nothing
    ([(0, 1, [1]), (1, 1, [3])], ErrorCode.INVALID_RECORD_STATE),  # acknowledged twice
])
def test_acknowledge_errors_change_nothing(batches, error):
    """SharePartition.acknowledge: InvalidRequestException for an invalid type or offsets past the
    in-flight records; InvalidRecordStateException for offsets not acquired by the member; the whole
    request is rolled back on the first error (rollbackOrProcessStateUpdates)."""
    c = Ctx()
    c.acquire("m1", [(0, 4)])
    c.acquire("m2", [(5, 9)])
    before = c.sp.in_flight()
    assert c.ack("m1", *batches) == (error, [])
    assert c.sp.in_flight() == before


def test_acknowledge_before_any_fetch_is_invalid_record_state():
    c = Ctx()
    assert c.ack("m1", (0, 0, [ACCEPT])) == (ErrorCode.INVALID_RECORD_STATE, [])


def test_a_failed_write_rolls_the_transition_back():
    """completeStateTransition(false): while the write is in flight the offsets are neither acquirable nor
    acknowledgeable; if it fails they are the member's again, as before."""
    c = Ctx()
    c.acquire("m1", [(0, 4)])
    out = c.sp.acknowledge("m1", [(0, 4, [RELEASE])], c.now)
    assert c.sp.acquire("m2", [(0, 4)], 500, c.now).acquired == []
    assert c.sp.acknowledge("m1", [(0, 4, [ACCEPT])], c.now).error == ErrorCode.INVALID_RECORD_STATE
    c.sp.rollback(out.records)
    assert c.sp.state_of(0) == (ACQUIRED, 1, "m1", LOCK)
    assert c.ack("m1", (0, 4, [ACCEPT]))[0] == ErrorCode.NONE
    assert c.sp.start_offset == 5


def test_snapshot_every_n_updates_as_kafka_counts():
    """ShareCoordinatorShard.generateShareStateRecord with share.coordinator.snapshot.update.records.per.snapshot
    = 2: the counter starts at the first update (0), so the first snapshot comes after three updates, the
    next ones after two; a snapshot carries the whole merged state at the next snapshot epoch."""
    c = Ctx(ShareConfig(snapshot_update_records=2))
    kinds = []
    for offset in range(7):
        c.acquire("m1", [(offset, offset)])
        kinds += [(rec.type, rec.snapshot_epoch) for rec in c.ack("m1", (offset, offset, [RELEASE]))[1]]
        c.acquire("m1", [(offset, offset)])
    S, U = r.SHARE_SNAPSHOT, r.SHARE_UPDATE
    assert [r.decoded(c.log[0]).type] + [k for k, _ in kinds] == [S, U, U, U, S, U, U, S]
    assert [e for _, e in kinds] == [0, 0, 0, 1, 1, 1, 2]
    snapshot = r.decoded(c.log[-1])
    assert snapshot.state_batches == (r.StateBatch(0, 6, AVAILABLE, 1),)
    assert c.reload().durable.summary() == c.sp.durable.summary()


def test_initialize_latest_and_earliest():
    """share.auto.offset.reset: latest (Kafka's default) starts at the latest offset, earliest at the log
    start; the start offset is written as the share-partition's first snapshot."""
    latest = SharePartition("g", T, 0)
    (rec,) = latest.initialize("latest", 3, 40, 5)
    assert r.decoded(rec) == r.ShareStateRecord(r.SHARE_SNAPSHOT, "g", T, 0, 0, 0, 40, (), 0, 0, 5, 5)
    latest.replay(rec)
    assert (latest.start_offset, latest.end_offset, latest.next_fetch_offset()) == (40, 40, 40)
    assert latest.initialize("earliest", 3, 40, 6) == []
    assert Ctx(start=3).sp.start_offset == 3


def test_skip_to_the_log_start_drops_what_is_below():
    """The log's start moved past the share-partition's start (retention, DeleteRecords): the start offset
    follows it, what was in flight below goes, and a reload agrees (SharePartition's start offset reset)."""
    import uuid as _uuid

    from kcoord.share.partition import ACCEPT, ACQUIRED, SharePartition

    sp = SharePartition("g", _uuid.UUID(int=3), 0)
    for record in sp.initialize("earliest", 0, 10, now_ms=0):
        sp.replay(record)
    assert sp.acquire("m", [(0, 9)], 100, now_ms=1).count == 10
    for record in sp.acknowledge("m", [(0, 1, [ACCEPT])], now_ms=2).records:
        sp.replay(record)
    records = sp.skip_to(6, now_ms=3)
    assert sp.skip_to(1, now_ms=3) == []  # never backwards
    for record in records:
        sp.replay(record)
    assert (sp.start_offset, sorted(sp.in_flight())) == (6, [6, 7, 8, 9])
    assert sp.state_of(6)[:3] == (ACQUIRED, 1, "m")
