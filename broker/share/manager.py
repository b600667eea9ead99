"""SharePartitionManager: this node's share-partitions and share sessions (Kafka's SharePartitionManager,
on asyncio). It owns every kcoord.share.partition.SharePartition, keyed (group id, topic id, partition),
and runs one operation at a time on each (a lock per share-partition): an operation changes the
in-memory state, the ShareCoordinator writes the records that make it durable, then they are replayed
(or rolled back when the write failed). One at a time keeps the records of a share-partition in the log
in the order they were computed, so the start offset each carries never goes back on replay.

- A share-partition starts when a ShareFetch first reaches it: from the records loaded at start if it
  has any, else initialized at share.auto.offset.reset (the group's config; Kafka's default latest) and
  that snapshot written before anything is acquired.
- Acquiring reads the log from the share-partition's next fetch offset (kcoord.broker.share.log_reader)
  with the group's share.isolation.level; markers and aborted transactions are archived, never delivered.
  In cluster mode only the partition's leader serves it (NOT_LEADER_OR_FOLLOWER elsewhere), up to the
  ISR's high watermark, and its state lives with the share coordinator of its key
  (kcoord.broker.share.persister): read at the partition's leader epoch when this node first serves it
  in a term (a new term reads it again), every write made durable there before it is replayed here.
- A ShareFetch that acquired nothing waits like a Fetch (broker/data/fetch_wait.py) until new data, a
  release or a lock expiry on one of its partitions, or its MaxWaitMs.
- Acquisition locks run out on a ticker (every LOCK_TICK_S); `expire_locks_now` is the test kit's
  timer control (the admin endpoint).
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kcoord.broker.data.visibility import high_watermark
from kcoord.broker.share import log_reader
from kcoord.broker.share.coordinator import ShareCoordinator, ShareKey

if TYPE_CHECKING:
    from kcoord.broker.share.persister import ShareStatePersister
from kcoord.protocol.errors import ErrorCode
from kcoord.share import records as r
from kcoord.share.partition import ACQUIRED, EARLIEST, LATEST, AcquiredRecords, ShareConfig, SharePartition
from kcoord.share.session import ShareSession, ShareSessionCache
from kcoord.share.state import expand

if TYPE_CHECKING:
    from kcoord.broker.app import Broker

log = logging.getLogger("kcoord.share")

LOCK_TICK_S = 0.1
# The most one share-partition's read takes from its log per ShareFetch (at least one whole batch): what is
# acquired is bounded by MaxRecords anyway, and librdkafka asks for MaxBytes 50 MiB.
READ_MAX_BYTES = 1 << 20
AckBatch = tuple[int, int, Sequence[int]]  # first offset, last offset, acknowledge types
ACK_TYPE_NAMES = {0: "gap", 1: "accept", 2: "release", 3: "reject", 4: "renew"}


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def iso_duration_ms(text: str) -> int:
    """An ISO-8601 duration as share.auto.offset.reset's by_duration takes it (PnDTnHnMnS) in ms."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"not an ISO-8601 duration: {text!r}")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class PartitionFetch:
    """One share-partition's part of a ShareFetch response."""
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: bytes | None = None
    acquired: list[AcquiredRecords] = field(default_factory=list)
    leader_epoch: int = 0
    skipped: bool = False  # offsets were archived (markers, aborted transactions): read on at once

    @property
    def count(self) -> int:
        return sum(a.last_offset - a.first_offset + 1 for a in self.acquired)


class SharePartitionManager:
    def __init__(self, broker: Broker, coordinator: ShareCoordinator, now_ms: Callable[[], int] = wall_ms) -> None:
        self.broker = broker
        self.coordinator = coordinator
        # cluster mode: the share-state RPCs to each key's share coordinator (None: the local coordinator)
        self.persister: ShareStatePersister | None = None
        self._terms: dict[ShareKey, int] = {}  # cluster mode: the leader epoch each share-partition was read at
        self.now_ms = now_ms
        self.sessions = ShareSessionCache(broker.config.get("group.share.max.share.sessions"))
        self._partitions: dict[ShareKey, SharePartition] = {}
        self._loaded: dict[ShareKey, list] = {}  # records read at start, until the share-partition is used
        self._locks: dict[ShareKey, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._ticker: asyncio.Task | None = None
        self._expiring: set[asyncio.Task] = set()  # expiries (timer control) and releases under way

    def start(self) -> None:
        if self.persister is None:
            self._loaded = self.coordinator.load()
        else:  # nothing is read until served: the share coordinator has it
            self.coordinator.active = True
        self._ticker = asyncio.get_running_loop().create_task(self._expire_loop())
        self.broker.disconnect_listeners.append(self.connection_closed)

    def connection_closed(self, connection_id: str) -> None:
        """A client connection closed: the share sessions it opened go, and what their members hold is
        released (ShareSessionCache's ConnectionDisconnectListener, ShareGroupListener.onMemberLeave)."""
        for session in self.sessions.connection_closed(connection_id):
            task = asyncio.get_running_loop().create_task(self.release_session(session))
            self._expiring.add(task)
            task.add_done_callback(self._expiring.discard)

    async def close(self) -> None:
        self.coordinator.active = False
        for task in [self._ticker, *self._expiring]:
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in [self._ticker, *self._expiring] if t is not None), return_exceptions=True)

    # ---------------------------------------------------------------- the group's settings

    def share_config(self, group_id: str) -> ShareConfig:
        get, overrides = self.broker.config.get, self.broker.group_configs.group_config(group_id)
        return ShareConfig(
            delivery_count_limit=get("group.share.delivery.count.limit"),
            record_lock_duration_ms=overrides.get("share.record.lock.duration.ms",
                                                  get("group.share.record.lock.duration.ms")),
            max_record_locks=get("group.share.partition.max.record.locks"))

    def lock_duration_ms(self, group_id: str) -> int:
        return self.share_config(group_id).record_lock_duration_ms

    def _group_setting(self, group_id: str, name: str, default: str) -> str:
        return str(self.broker.group_configs.group_config(group_id).get(name, default))

    # ---------------------------------------------------------------- share-partitions

    def _get(self, key: ShareKey) -> SharePartition:
        sp = self._partitions.get(key)
        if sp is None:
            records = self._loaded.pop(key, [])
            config, epoch = self.share_config(key[0]), self._terms.get(key, 0)
            sp = (SharePartition.load(*key, records, config, leader_epoch=epoch) if records
                  else SharePartition(*key, config, leader_epoch=epoch))
            self._partitions[key] = sp
        return sp

    async def _read_state(self, key: ShareKey, leader_epoch: int) -> ErrorCode:
        """Cluster mode: the share-partition's state from its share coordinator, once per leader term
        (SharePartition.maybeInitialize's ReadShareGroupState); what was in memory from an older term goes."""
        if self.persister is None or self._terms.get(key) == leader_epoch:
            return ErrorCode.NONE
        error, records = await self.persister.read(key, leader_epoch)
        if error != ErrorCode.NONE:
            return error
        self._partitions.pop(key, None)
        self._loaded.pop(key, None)
        if records:
            self._loaded[key] = records
        self._terms[key] = leader_epoch
        return ErrorCode.NONE

    def _current_term(self, key: ShareKey, plog) -> bool:
        """Single node: always; cluster mode: the share-partition was read in the partition's current term."""
        return self.persister is None or self._terms.get(key) == plog.leader_epoch

    def get(self, group_id: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        """The share-partition if it has state (initialized: in memory, or in the records loaded at start)."""
        key = (group_id, topic_id, partition)
        if key not in self._partitions and key not in self._loaded:
            return None
        sp = self._get(key)
        return sp if sp.initialized else None

    def partitions_of(self, group_id: str) -> list[tuple[uuid.UUID, int]]:
        """(topic id, partition) of every share-partition of `group_id` that has state."""
        keys = {k for k in self._partitions if k[0] == group_id} | {k for k in self._loaded if k[0] == group_id}
        return sorted((k[1], k[2]) for k in keys if self.get(*k) is not None)

    async def _write(self, key: ShareKey, sp: SharePartition, records: list) -> ErrorCode:
        if not records:
            return ErrorCode.NONE
        error = await self._persist(key, records, sp.state_epoch)
        if error != ErrorCode.NONE:
            sp.rollback(records)
            return error
        for record in records:
            sp.replay(record)
        return ErrorCode.NONE

    async def _persist(self, key: ShareKey, records: list, state_epoch: int) -> ErrorCode:
        if self.persister is None:
            return await self.coordinator.write(key, records)
        error = await self.persister.write(key, records, state_epoch)
        if error in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
            # the state moved on without this node (a reset elsewhere, a newer leader): read it again next time
            self._terms.pop(key, None)
        return error

    async def _initialize(self, key: ShareKey, sp: SharePartition, plog, hw: int) -> ErrorCode:
        """SharePartition.maybeInitialize: a share-partition without state starts at
        share.auto.offset.reset: earliest, latest (Kafka's default), or by_duration:<ISO-8601 duration> --
        the first offset whose timestamp is at or after now minus the duration (latest if there is none)."""
        if sp.initialized:
            return ErrorCode.NONE
        reset, now = self._group_setting(key[0], "share.auto.offset.reset", LATEST), self.now_ms()
        if reset == EARLIEST:
            start = plog.log_start_offset
        elif reset.startswith("by_duration:"):
            found = plog.offset_for_timestamp(now - iso_duration_ms(reset.removeprefix("by_duration:")))
            start = hw if found is None else min(max(found[0], plog.log_start_offset), hw)
        else:
            start = hw
        return await self._write(key, sp, sp.initialize_at(start, now))

    def _locate(self, topic_id: uuid.UUID, partition: int):
        """(topic name, partition log) or the error for a topic id / partition this node does not have."""
        topic = self.broker.topics.by_id(topic_id)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_ID, None
        plog = self.broker.logs.get(topic.name, partition) if 0 <= partition < topic.partitions else None
        if plog is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return topic.name, plog

    def _notify(self, key: ShareKey) -> None:
        """Records became available again: wake the long polls waiting on their partition."""
        topic = self.broker.topics.by_id(key[1])
        if topic is not None:
            self.broker.fetch_waiters.notify((topic.name, key[2]))

    # ---------------------------------------------------------------- fetch

    async def fetch(self, group_id: str, member_id: str, wanted: Sequence[tuple[uuid.UUID, int]],
                    max_records: int, max_bytes: int, max_wait_ms: int, strict: bool = False
                    ) -> dict[tuple[uuid.UUID, int], PartitionFetch]:
        """Acquire up to `max_records` for `member_id` across `wanted`, waiting up to `max_wait_ms` while
        there is nothing to acquire (DelayedShareFetch)."""
        deadline = time.monotonic() + max(max_wait_ms, 0) / 1000.0
        while True:
            results = await self._fetch_once(group_id, member_id, wanted, max_records, max_bytes, strict)
            remaining = deadline - time.monotonic()
            if any(r.acquired or r.error for r in results.values()) or remaining <= 0 or self.broker.stopping:
                return results
            if any(r.skipped for r in results.values()):
                continue  # only markers or aborted records were read: what follows them may be deliverable
            tps = []
            for topic_id, partition in wanted:
                topic = self.broker.topics.by_id(topic_id)
                if topic is not None:
                    tps.append((topic.name, partition))
            if not tps or not await self.broker.fetch_waiters.wait(tps, remaining):
                return await self._fetch_once(group_id, member_id, wanted, max_records, max_bytes, strict)

    async def _fetch_once(self, group_id: str, member_id: str, wanted: Sequence[tuple[uuid.UUID, int]],
                          max_records: int, max_bytes: int, strict: bool) -> dict[tuple[uuid.UUID, int], PartitionFetch]:
        isolation = 1 if self._group_setting(group_id, "share.isolation.level", "") == "read_committed" else 0
        results: dict[tuple[uuid.UUID, int], PartitionFetch] = {}
        records_left, bytes_left = max_records, max_bytes
        for topic_id, partition in wanted:
            name, plog = self._locate(topic_id, partition)
            if plog is None:
                results[(topic_id, partition)] = PartitionFetch(name, None)
                continue
            result = results[(topic_id, partition)] = PartitionFetch(leader_epoch=plog.leader_epoch)
            hw = high_watermark(plog)
            replication = self.broker.visibility.replication
            if replication is not None:  # cluster mode: the leader serves, up to the ISR's high watermark
                error, hw = replication.consumer_fetch_bounds(name, partition, -1, hw)
                if error != ErrorCode.NONE:
                    result.error = error
                    continue
            if records_left <= 0 or bytes_left <= 0:
                continue
            key = (group_id, topic_id, partition)
            got = read = None
            async with self._locks[key]:
                error = await self._read_state(key, plog.leader_epoch)
                if error != ErrorCode.NONE:
                    result.error = error
                    continue
                sp = self._get(key)
                error = await self._initialize(key, sp, plog, hw)
                if error != ErrorCode.NONE:
                    result.error = error
                    continue
                if sp.start_offset < plog.log_start_offset:  # retention / DeleteRecords passed it
                    await self._write(key, sp, sp.skip_to(plog.log_start_offset, self.now_ms()))
                if not sp.can_acquire():
                    continue
                read = log_reader.read(plog, self.broker.txn_index, sp.next_fetch_offset(),
                                       min(bytes_left, READ_MAX_BYTES), isolation, hw)
                if not read.batches:
                    continue
                got = sp.acquire(member_id, read.batches, records_left, self.now_ms(),
                                 aborted=read.not_delivered, strict=strict)
                await self._write(key, sp, got.records)  # archived markers / aborted records, if any
                result.skipped = bool(got.records)
            if got is not None and read is not None and got.acquired:
                self._count_deliveries(group_id, name, got.acquired)
                result.acquired = got.acquired
                result.records = log_reader.trim(read.records, got.acquired[0].first_offset,
                                                 got.acquired[-1].last_offset)
                records_left -= got.count
                bytes_left -= len(result.records)
        return results

    def _count_deliveries(self, group_id: str, topic: str, acquired: list[AcquiredRecords]) -> None:
        for a in acquired:
            self.broker.metrics.inc("kcoord_share_deliveries_total", a.last_offset - a.first_offset + 1,
                                    group=group_id, topic=topic, redelivery=a.delivery_count > 1)

    def _count_acknowledgements(self, group_id: str, batches: Sequence[AckBatch]) -> None:
        counts: dict[int, int] = defaultdict(int)
        for first, last, types in batches:
            if len(types) == 1:
                counts[types[0]] += last - first + 1
            else:
                for t in types:
                    counts[t] += 1
        for t, n in counts.items():
            self.broker.metrics.inc("kcoord_share_acknowledgements_total", n, group=group_id,
                                    type=ACK_TYPE_NAMES.get(t, str(t)))

    # ---------------------------------------------------------------- acknowledge and release

    async def acknowledge(self, group_id: str, member_id: str, topic_id: uuid.UUID, partition: int,
                          batches: Sequence[AckBatch]) -> tuple[ErrorCode, str | None]:
        """SharePartitionManager.acknowledge: durable before it returns NONE."""
        name, plog = self._locate(topic_id, partition)
        if plog is None:
            return name, None
        key = (group_id, topic_id, partition)
        async with self._locks[key]:
            sp = self._partitions.get(key)
            if sp is None or not sp.initialized or not self._current_term(key, plog):
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no acquired records."
            outcome = sp.acknowledge(member_id, batches, self.now_ms())
            if outcome.error != ErrorCode.NONE:
                return outcome.error, outcome.message
            error = await self._write(key, sp, outcome.records)
        if error == ErrorCode.NONE:
            self._count_acknowledgements(group_id, batches)
        if any(t in (0, 2) for _f, _l, types in batches for t in types):  # released offsets: redeliverable
            self._notify(key)
        return error, None

    async def release_session(self, session: ShareSession) -> None:
        """A closed or replaced share session: its member's acquired records go back
        (SharePartitionManager.releaseSession), on every share-partition of the group."""
        await self.release_member(session.group_id, session.member_id)

    async def release_member(self, group_id: str, member_id: str) -> None:
        for key in [k for k in self._partitions if k[0] == group_id]:
            async with self._locks[key]:
                sp = self._partitions[key]
                if not sp.acquired_by(member_id):
                    continue
                outcome = sp.release_member(member_id, self.now_ms())
                await self._write(key, sp, outcome.records)
            self._notify(key)

    # ---------------------------------------------------------------- admin: alter and delete state

    async def reset(self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int,
                    state_epoch: int | None = None) -> ErrorCode:
        """AlterShareGroupOffsets: the share-partition starts over at `start_offset`, nothing in flight, at
        the next state epoch (or `state_epoch`: InitializeShareGroupState's snapshot)."""
        key = (group_id, topic_id, partition)
        async with self._locks[key]:
            old = self.get(*key)
            if state_epoch is None:
                state_epoch = 0 if old is None else old.state_epoch + 1
            sp = SharePartition(*key, self.share_config(group_id), state_epoch=state_epoch)
            records = [r.encode(sp.durable.initial_record(start_offset, sp.state_epoch, sp.leader_epoch,
                                                          self.now_ms()))]
            error = await self._persist(key, records, sp.state_epoch)
            if error == ErrorCode.NONE:
                sp.replay(records[0])
                self._partitions[key] = sp
                self._loaded.pop(key, None)
        return error

    async def write_state(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                          batches: Sequence[r.StateBatch], delivery_complete_count: int) -> tuple[ErrorCode, str | None]:
        """Single node: a WriteShareGroupState from outside (ShareCoordinatorShard.writeState's checks and
        merge). The share-partition takes the written state: what was in flight here goes, and it is
        rebuilt from its durable state, as a new leader would read it."""
        async with self._locks[key]:
            sp = self.get(*key)
            if sp is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no state to write on."
            if leader_epoch < sp.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch is older than the recorded one."
            if state_epoch < sp.state_epoch:
                return ErrorCode.FENCED_STATE_EPOCH, "The state epoch is older than the recorded one."
            d = sp.durable
            start = d.start_offset if start_offset < 0 else start_offset
            record = r.encode(d.record_for(start, expand(batches, start), delivery_complete_count, leader_epoch,
                                           self.now_ms()))
            error = await self.coordinator.write(key, [record])
            if error != ErrorCode.NONE:
                return error, None
            d.replay(record.decoded)
            self._partitions.pop(key, None)
            self._loaded[key] = [r.encode(r.ShareStateRecord(
                r.SHARE_SNAPSHOT, *key, d.snapshot_epoch, d.leader_epoch, d.start_offset, d.state_batches(),
                d.delivery_complete_count, d.state_epoch, d.create_timestamp, d.write_timestamp))]
        self._notify(key)
        return ErrorCode.NONE, None

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        """DeleteShareGroupOffsets: the share-partition's state goes (a tombstone); a later fetch
        initializes it again from share.auto.offset.reset."""
        key = (group_id, topic_id, partition)
        async with self._locks[key]:
            if self.get(*key) is None:
                return ErrorCode.NONE
            error = await self._persist(key, [(r.snapshot_key(*key), None, ())], 0)
            if error == ErrorCode.NONE:
                self._partitions.pop(key, None)
                self._loaded.pop(key, None)
        return error

    async def delete_group_state(self, group_id: str) -> ErrorCode:
        """DeleteGroups on a share group: every share-partition's state goes first (as Kafka's
        GroupCoordinatorService.deleteGroups deletes the share group state before the group)."""
        for topic_id, partition in self.partitions_of(group_id):
            error = await self.delete(group_id, topic_id, partition)
            if error != ErrorCode.NONE:
                return error
        return ErrorCode.NONE

    # ---------------------------------------------------------------- acquisition locks

    async def expire_locks(self, due_by_ms: int | None = None, keys: Iterable[ShareKey] | None = None) -> int:
        """Let the locks due by now (or by `due_by_ms`) run out; returns how many share-partitions had some."""
        now = self.now_ms()
        due = now if due_by_ms is None else due_by_ms
        expired = 0
        for key in list(self._partitions if keys is None else keys):
            sp = self._partitions.get(key)
            deadline = None if sp is None else sp.next_lock_deadline()
            if sp is None or deadline is None or deadline > due:
                continue
            async with self._locks[key]:
                running_out = sum(1 for view in sp.in_flight().values()
                                  if view[0] == ACQUIRED and view[3] is not None and view[3] <= due)
                outcome = sp.expire_locks(now, due)
                self.broker.metrics.inc("kcoord_share_lock_expiries_total", running_out, group=key[0])
                await self._write(key, sp, outcome.records)
            expired += 1
            self._notify(key)
        return expired

    def start_expiring_locks(self, group_id: str | None = None) -> int:
        """Timer control (the admin endpoint): every acquisition lock of `group_id`'s share-partitions (all
        groups: None) runs out now, as if its duration had passed, in a task (each share-partition's
        expiry waits its turn); returns how many share-partitions hold locks."""
        keys = [k for k, sp in self._partitions.items()
                if (group_id is None or k[0] == group_id) and sp.next_lock_deadline() is not None]
        task = asyncio.get_running_loop().create_task(self.expire_locks(2**62, keys))
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)
        return len(keys)

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(LOCK_TICK_S)
            try:
                await self.expire_locks()
            except Exception:  # a bug: log it and keep the locks running out
                log.exception("share-partition lock expiry failed")
