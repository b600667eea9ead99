"""The replica fetcher: one asyncio task per (this node, leader node) that replicates with Kafka's Fetch.

Kafka's AbstractFetcherThread / ReplicaFetcherThread / RemoteLeaderEndPoint (core/src/main/scala/kafka/
server/), one task instead of a thread, with fetch-based truncation (KIP-595's DivergingEpoch, Kafka's
default since 2.7) and no fetch sessions (kcoord's leaders refuse them, so every fetch is a full one):

- buildFetch: per partition the fetch offset (our log end), the current leader epoch (FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH when it is not the leader's, KIP-320) and the epoch of our last batch
  (`last_fetched_epoch`); the request carries our replica id and broker epoch (Fetch v15+ ReplicaState)
  and long-polls `replica.fetch.wait.max.ms` (500 ms). Fetch v18 when every topic has an id, else v12
  (topics by name, the last version before ids).
- processPartitionData: the batches are appended as they came (storage's append_as_follower: offsets
  and epochs kept), fsynced by the log's group commit -- all partitions of a response under one wait --
  and only then does the follower's high watermark follow the leader's (UnifiedLog.updateHighWatermark).
  So the offset the next fetch reports, which the leader's high watermark and acks=all count, is durable.
- DivergingEpoch: truncate to PartitionReplication.truncation_point (AbstractFetcherThread.
  truncateOnFetchResponse / getOffsetTruncationState), then fetch again: a cut that is not final is
  refined by the next answer, which names our new latest epoch.
- FENCED_LEADER_EPOCH: our epoch is older than the leader's -- the partition waits for the metadata to
  name a newer one (the next `assign`); UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER / unknown topic:
  retried after replica.fetch.backoff.ms (AbstractFetcherThread.handlePartitionsWithErrors).
- A broken connection: closed, and reopened after the backoff (ReplicaFetcherBlockingSend).
- The connection is kcoord.cluster.node_connection's, from this node's own loopback address on a shared
  machine (so the test kit's link proxies can tell which node a replication connection is from).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from kcoord.cluster.leader_epochs import EpochEndOffset
from kcoord.cluster.metadata_image import TopicPartition
from kcoord.cluster.node_connection import NodeConnection
from kcoord.cluster.replica_state import PartitionReplication
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.storage import StorageError
from kcoord.storage.log import PartitionLog

if TYPE_CHECKING:
    from kcoord.cluster.replica_manager import ReplicationConfig

log = logging.getLogger("kcoord.cluster.fetcher")

FETCH_KEY = 1
FETCH_VERSION = 18  # the highest Fetch version kcoord serves (broker/apis/fetch.py)
FETCH_VERSION_BY_NAME = 12  # the last one with topic names, for a topic whose id is not known
SOCKET_TIMEOUT_S = 30.0  # replica.socket.timeout.ms

# errors after which the partition is fetched again after the backoff (handlePartitionsWithErrors)
_RETRY = {ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
          ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.OFFSET_OUT_OF_RANGE}


class LeaderEndpoint(Protocol):
    """How a fetcher reaches its leader (Kafka's LeaderEndPoint): a Fetch in, its response out. Raises
    ConnectionError / OSError / TimeoutError when the leader cannot be reached."""

    async def fetch(self, request: m.FetchRequest, version: int) -> m.FetchResponse: ...

    async def close(self) -> None: ...


class FetcherOwner(Protocol):
    """What the fetcher asks of the node's ReplicaManager."""

    def broker_epoch(self) -> int: ...

    def follower_high_watermark_moved(self, tp: TopicPartition) -> None: ...


class TcpLeaderEndpoint:
    """The leader over a NodeConnection (ReplicaFetcherBlockingSend): one request in flight, reopened on
    the next fetch after a failure. `address()` is looked up at each connect (None: not known now);
    `local_host`, this node's listener host, is the connection's source when both are loopback addresses."""

    def __init__(self, address: Callable[[], tuple[str, int] | None], client_id: str = "kcoord-replica-fetcher",
                 local_host: str | None = None):
        self._connection = NodeConnection(address, client_id, local_host)

    async def fetch(self, request: m.FetchRequest, version: int) -> m.FetchResponse:
        return await self._connection.request(FETCH_KEY, version, request, request.max_wait_ms / 1000 + SOCKET_TIMEOUT_S)

    async def close(self) -> None:
        await self._connection.close()


@dataclass(eq=False, slots=True)
class _FetchState:
    """One partition in this fetcher (Kafka's PartitionFetchState); the fetch offset is the log end."""

    tp: TopicPartition
    topic_id: uuid.UUID | None
    leader_epoch: int
    part: PartitionReplication
    log: PartitionLog
    delayed_until: float = 0.0  # monotonic seconds
    fenced: bool = False  # FENCED_LEADER_EPOCH: wait for the metadata to bring a newer epoch


class ReplicaFetcher:
    """Replicates the partitions this node follows from one leader (see the module docstring)."""

    def __init__(self, node_id: int, leader_id: int, endpoint: LeaderEndpoint, owner: FetcherOwner,
                 config: ReplicationConfig) -> None:
        self.node_id = node_id
        self.leader_id = leader_id
        self._endpoint = endpoint
        self._owner = owner
        self._config = config
        self._states: dict[TopicPartition, _FetchState] = {}
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.fetches = 0  # responses processed (tests, metrics)

    # -- the partitions ------------------------------------------------------------------------------

    def assign(self, tp: TopicPartition, topic_id: uuid.UUID | None, leader_epoch: int,
               part: PartitionReplication, plog: PartitionLog) -> None:
        """Fetch `tp` at `leader_epoch` (AbstractFetcherThread.addPartitions): a new epoch clears a fence or
        a backoff; the first fetch names our latest epoch, so a diverged log is cut before anything is
        appended."""
        current = self._states.get(tp)
        if current is not None and current.leader_epoch == leader_epoch and current.part is part:
            return
        self._states[tp] = _FetchState(tp, topic_id, leader_epoch, part, plog)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self._states.pop(tp, None)
        self._changed.set()

    @property
    def idle(self) -> bool:
        return not self._states

    @property
    def partitions(self) -> list[TopicPartition]:
        return list(self._states)

    # -- running -------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"kcoord replica-fetcher {self.node_id}->{self.leader_id}")

    def stop_soon(self) -> None:
        """Stop without waiting (a fetcher left without partitions)."""
        asyncio.get_running_loop().create_task(self.stop(), name=f"kcoord stop fetcher ->{self.leader_id}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._endpoint.close()

    async def _run(self) -> None:
        backoff = self._config.replica_fetch_backoff_ms / 1000
        while True:
            now = time.monotonic()
            ready = [s for s in self._states.values() if not s.fenced and s.delayed_until <= now]
            if not ready:
                delays = [s.delayed_until - now for s in self._states.values() if not s.fenced]
                await self._wait_for_change(min(delays) if delays else None)
                continue
            version = FETCH_VERSION if all(s.topic_id is not None for s in ready) else FETCH_VERSION_BY_NAME
            request = self._build_fetch(ready, version)
            try:
                response = await self._endpoint.fetch(request, version)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the leader is unreachable: every partition waits the backoff
                log.info("replica %d: fetch from leader %d failed: %r", self.node_id, self.leader_id, exc)
                await self._endpoint.close()
                for state in ready:
                    state.delayed_until = time.monotonic() + backoff
                continue
            self.fetches += 1
            await self._process(ready, request, response, version)

    async def _wait_for_change(self, timeout_s: float | None) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)

    def _build_fetch(self, ready: list[_FetchState], version: int) -> m.FetchRequest:
        """RemoteLeaderEndPoint.buildFetch."""
        R = m.FetchRequest
        by_topic: dict[str, list[_FetchState]] = {}
        for state in ready:
            by_topic.setdefault(state.tp.topic, []).append(state)
        topics = []
        for name, states in by_topic.items():
            partitions = [R.FetchPartition(
                partition=s.tp.partition, current_leader_epoch=s.leader_epoch, fetch_offset=s.log.log_end_offset,
                last_fetched_epoch=s.part.last_fetched_epoch, log_start_offset=s.log.log_start_offset,
                partition_max_bytes=self._config.replica_fetch_max_bytes, high_watermark=s.part.high_watermark)
                for s in states]
            topic_id = states[0].topic_id
            topics.append(R.FetchTopic(topic=name, topic_id=topic_id or uuid.UUID(int=0), partitions=partitions))
        broker_epoch = self._owner.broker_epoch()
        return R(replica_id=self.node_id if version < 15 else -1,
                 replica_state=R.ReplicaState(replica_id=self.node_id, replica_epoch=broker_epoch),
                 max_wait_ms=self._config.replica_fetch_wait_max_ms, min_bytes=self._config.replica_fetch_min_bytes,
                 max_bytes=self._config.replica_fetch_response_max_bytes, isolation_level=0, session_id=0,
                 session_epoch=-1, topics=topics, forgotten_topics_data=[], rack_id="")

    # -- the response ----------------------------------------------------------------------------------

    async def _process(self, ready: list[_FetchState], request: m.FetchRequest, response: m.FetchResponse,
                       version: int) -> None:
        """AbstractFetcherThread.processFetchRequest: append every partition's data, one fsync wait for
        all, then the high watermarks."""
        backoff = self._config.replica_fetch_backoff_ms / 1000
        if response.error_code:
            log.info("replica %d: fetch from %d answered %s", self.node_id, self.leader_id,
                     ErrorCode(response.error_code).name)
            for state in ready:
                state.delayed_until = time.monotonic() + backoff
            return
        sent = {s.tp: s for s in ready}
        appended: list[tuple[_FetchState, int, Any]] = []
        for topic, t in zip(request.topics, response.responses, strict=False):
            for p in t.partitions:
                state = sent.get(TopicPartition(topic.topic, p.partition_index))
                if state is None or self._states.get(state.tp) is not state:
                    continue  # removed or re-assigned while the fetch was out: its data is not ours
                sync = self._partition_data(state, p)
                if sync is not None:
                    appended.append((state, p.high_watermark, sync))
        if not appended:
            return
        outcomes = await asyncio.gather(*(sync for _s, _hw, sync in appended), return_exceptions=True)
        for (state, high_watermark, _sync), outcome in zip(appended, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.error("%s: fsync of replicated data failed: %s", state.tp, outcome)
                state.delayed_until = time.monotonic() + backoff
                continue
            if self._states.get(state.tp) is not state:
                continue
            before = state.part.high_watermark
            if state.part.on_fetch_response(high_watermark) != before:
                self._owner.follower_high_watermark_moved(state.tp)

    def _partition_data(self, state: _FetchState, p: Any) -> Any:
        """One partition's answer (ReplicaFetcherThread.processPartitionData and the error branches of
        processFetchRequest). Returns what to await before its high watermark moves, or None."""
        error = ErrorCode(p.error_code)
        tp, plog = state.tp, state.log
        if error is ErrorCode.FENCED_LEADER_EPOCH:
            log.info("%s: fenced at leader epoch %d by leader %d: waiting for newer metadata",
                     tp, state.leader_epoch, self.leader_id)
            state.fenced = True
            return None
        if error is not ErrorCode.NONE:
            if error not in _RETRY:
                log.warning("%s: leader %d answered %s", tp, self.leader_id, error.name)
            state.delayed_until = time.monotonic() + self._config.replica_fetch_backoff_ms / 1000
            return None
        diverging = p.diverging_epoch
        try:
            if diverging is not None and diverging.epoch >= 0:
                self._truncate(state, EpochEndOffset(diverging.epoch, diverging.end_offset))
                return None  # the next fetch, from the new log end, brings data and the high watermark
            records = p.records
            if not records:
                return _done()
            info = plog.append_as_follower(records)
            return plog.sync(info)
        except StorageError as exc:
            log.error("%s: truncating or appending replicated data failed: %s", tp, exc)
            state.delayed_until = time.monotonic() + self._config.replica_fetch_backoff_ms / 1000
            return None

    def _truncate(self, state: _FetchState, leader_answer: EpochEndOffset) -> None:
        """AbstractFetcherThread.truncateOnFetchResponse."""
        plog, part = state.log, state.part
        cut = part.truncation_point(leader_answer, plog.log_end_offset)
        log.info("%s: log diverges from leader %d (its epoch %d ends at %d): truncating %d -> %d%s",
                 state.tp, self.leader_id, leader_answer.epoch, leader_answer.end_offset, plog.log_end_offset,
                 cut.offset, "" if cut.completed else " (then asking again)")
        plog.truncate_to(cut.offset)
        part.on_log_truncated()


async def _done() -> None:
    return None


__all__ = ["FETCH_VERSION", "FetcherOwner", "LeaderEndpoint", "ReplicaFetcher", "TcpLeaderEndpoint"]
