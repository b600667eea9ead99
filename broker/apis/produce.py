"""Produce (key 0): validate each partition's record batch, append it, answer when it is durable.

Versions (we serve 3-13 and advertise 0-13, as Kafka 4 does since KAFKA-18659: librdkafka before 2.11.1
-- Debian's kcat among them -- disables gzip, snappy and lz4 unless ApiVersions lists Produce v0. A
request at v0-2 (magic 0/1 message sets, removed by KIP-896) closes the connection, as Kafka's
SocketServer does for a version it does not enable):
  v3: transactional_id; record batch v2 only
  v4: same as v3 (KAFKA_STORAGE_ERROR possible)
  v5: log_start_offset in the response
  v6: same as v5
  v7: same as v6 (ZStandard allowed)
  v8: record_errors and error_message in the response (KIP-467)
  v9: flexible
  v10: current leader / node endpoints tagged fields (KIP-951; unused by a single node)
  v11: TRANSACTION_ABORTABLE possible (KIP-890)
  v12: a transactional batch adds its partition to the transaction itself (KIP-890 part 2: KafkaApis'
       transactionSupportedOperation is addPartition above v11, so the AddPartitionsToTxnManager asks the
       coordinator to add, not only to verify); clients send it when transaction.version 2 is finalized
  v13: topics by topic id (KIP-516); UNKNOWN_TOPIC_ID for an id we do not know
acks=0: no response; if any partition failed the connection is closed, as Kafka does, so the client
notices. acks=1/-1: the response is sent once the append is fsynced (group commit), as
log.flush.interval.messages=1 (kcoord's default) promises; only then does the high watermark cover it
(kcoord.broker.data.visibility), whatever the acks. Idempotent batches (producer id >= 0) go
through the producer state: duplicates of one of the last 5 batches get their original offsets back.
Transactional batches are verified against the transaction coordinator first (KIP-890: the partition must
be in the producer's ongoing transaction) and open the partition's transaction (kcoord.broker.data.txn_index).
Per-partition checks and the append are kcoord.broker.data.append's.
Cluster mode (kcoord.cluster.replica_manager, ReplicaManager.appendRecords): only the leader takes a
batch (NOT_LEADER_OR_FOLLOWER); acks=-1 is refused with NOT_ENOUGH_REPLICAS while the ISR is below
min.insync.replicas, and once appended and fsynced here it is answered when the ISR holds it (the high
watermark passes it: DelayedProduce), NOT_ENOUGH_REPLICAS_AFTER_APPEND / NOT_LEADER_OR_FOLLOWER /
REQUEST_TIMED_OUT (after timeout_ms) otherwise. acks=0/1 are answered after the local append and fsync.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kcoord.broker.connection import CloseConnection
from kcoord.broker.context import RequestContext
from kcoord.broker.data.append import Appended, append_partition
from kcoord.broker.registry import api
from kcoord.protocol import messages as m
from kcoord.protocol.errors import DecodeError, ErrorCode
from kcoord.protocol.records import BatchHeader, parse_batch_header
from kcoord.txn.metadata import TV_2

if TYPE_CHECKING:
    from kcoord.broker.data.txn_verification import TxnVerifier
    from kcoord.cluster.replica_manager import ReplicaManager


@api(key=0, name="Produce", min_version=3, max_version=13, advertised_min_version=0)
async def handle(ctx: RequestContext, request: m.ProduceRequest):
    broker = ctx.broker
    acks = request.acks
    refused = _refusal(acks)
    by_id = ctx.api_version >= 13
    replication = broker.visibility.replication
    verified = None
    if request.transactional_id is not None and not refused:
        # after the markers of the id's previous transaction, if this node is writing them: a late batch of
        # the ended transaction then meets its marker, and the next one's first batch a complete transaction
        await broker.txn_coordinator.coordinator.settled(request.transactional_id)
        if ctx.api_version >= 12:
            verified = await _verify(broker, request, by_id, add=True)
        elif broker.txn_verifier is not None:
            verified = await _verify(broker, request, by_id, add=False)
    append = append_partition if replication is None else _leader_append(replication, acks)
    results: list[tuple[object, list[tuple[int, Appended]]]] = []
    for topic_data in request.topic_data:
        key = topic_data.topic_id if by_id else topic_data.name
        name = _topic_name(broker, topic_data.topic_id) if by_id else topic_data.name
        results.append((key, [
            (p.index, refused or (append(broker, name, p.index, p.records, request.transactional_id, verified)
                                  if name is not None
                                  else Appended(ErrorCode.UNKNOWN_TOPIC_ID)))
            for p in topic_data.partition_data]))
    appended = [a for _name, parts in results for _index, a in parts]
    for a in appended:
        if a.error:
            broker.metrics.inc("kcoord_partition_errors_total", api="Produce", error_code=a.error)
    logs = list({id(a.log): a.log for a in appended if a.log is not None}.values())
    if acks == 0:
        if broker.produce_quota.active:
            _throttle(ctx, request)  # no answer to carry it: the connection is muted all the same
        broker.visibility.publish_soon(logs)  # the partitions that took their batch
        failed = [(name, index, ErrorCode(a.error).name) for name, parts in results for index, a in parts if a.error]
        if failed:
            # The client expects no answer, so Kafka closes the connection to make it notice
            # (and refresh its metadata).
            raise CloseConnection(f"acks=0 produce failed for {failed}")
        return None
    lost = {id(lg) for lg, error in zip(logs, await broker.visibility.publish(logs), strict=True) if error}
    if replication is not None and acks == -1:
        await _wait_for_isr(replication, results, lost, request.timeout_ms)
    throttle_ms = _throttle(ctx, request) if broker.produce_quota.active else 0
    R = m.ProduceResponse
    return R(responses=[R.TopicProduceResponse(**{"topic_id" if by_id else "name": key}, partition_responses=[
        _response(index, a, id(a.log) in lost) for index, a in parts]) for key, parts in results],
        throttle_time_ms=throttle_ms)


def _throttle(ctx: RequestContext, request: m.ProduceRequest) -> int:
    """Record the request's bytes against its producer_byte_rate quota (broker/quota.py); the throttle time,
    also set on ctx so the server mutes the connection that long (KafkaApis.handleProduceRequest:
    quotas.produce.maybeRecordAndGetThrottleTimeMs, requestHelper.throttle). Kafka counts the whole request's
    size; kcoord its record batches (the request less a few dozen bytes of header and names)."""
    size = sum(len(p.records or b"") for t in request.topic_data for p in t.partition_data)
    throttle_ms = ctx.broker.produce_quota.record(ctx.session.principal.name, ctx.client_id or "", size)
    ctx.throttle_ms = max(ctx.throttle_ms, throttle_ms)
    return throttle_ms


def _leader_append(replication: ReplicaManager, acks: int):
    """append_partition on a cluster node: the leader and min ISR checks first, then the append, which
    wakes the followers' fetches."""
    def append(broker, name: str, index: int, records, transactional_id: str | None,
               verified: dict | None) -> Appended:
        error = replication.produce_error(name, index, acks)
        if error:
            return Appended(error)
        appended = append_partition(broker, name, index, records, transactional_id, verified)
        if appended.log is not None:
            replication.on_leader_append(name, index)
        return appended
    return append


async def _wait_for_isr(replication: ReplicaManager, results, lost: set[int], timeout_ms: int) -> None:
    """acks=-1 in cluster mode: each appended partition waits for the ISR, all at once (DelayedProduce)."""
    waiting = [a for _key, parts in results for _index, a in parts
               if not a.error and a.log is not None and id(a.log) not in lost]
    errors = await asyncio.gather(*(replication.wait_acks_all(a.log.topic, a.log.partition, a.last_offset, timeout_ms)
                                    for a in waiting))
    for a, error in zip(waiting, errors, strict=True):
        if error:
            a.error = error


async def _verify(broker, request: m.ProduceRequest, by_id: bool, add: bool) -> dict | None:
    """KIP-890: the transactional batches' partitions verified by the transaction coordinator when it is
    another node (cluster mode, AddPartitionsToTxnManager), in one request; None when it is this node or no
    batch is transactional (append_partition then asks the coordinator in-process). `add` (Produce v12+,
    transaction version 2): the coordinator adds the partitions first -- the other node over
    AddPartitionsToTxn, this one in-process -- and its one answer is every partition's verdict. A partition that got a
    marker of the producer while the answer travelled is refused INVALID_TXN_STATE: the transaction that
    was verified is over (UnifiedLog's VerificationGuard, cleared by the marker).

    A partition whose log already holds an ongoing transaction of the producer at its epoch is not asked
    (UnifiedLog.maybeStartTransactionVerification's SENTINEL guard for hasOngoingTransaction; ReplicaManager.
    maybeStartTransactionVerificationForPartitions sends only the others): after its first batch, a
    transaction's produces to a partition cost no coordinator round trip."""
    producer, partitions = None, []
    for topic_data in request.topic_data:
        name = _topic_name(broker, topic_data.topic_id) if by_id else topic_data.name
        for p in topic_data.partition_data:
            header = first_batch_header(p.records)
            if header is not None and header.is_transactional and name:
                producer = producer or (header.producer_id, header.producer_epoch)
                partitions.append((name, p.index))
    if producer is None:
        return None
    ends, ongoing = {}, []
    for tp in partitions:
        plog = broker.topics.log(*tp)
        if plog is not None:
            ends[tp] = plog.log_end_offset
            if (producer[0] in broker.txn_index.state(plog).ongoing
                    and broker.producers.epoch_of(tp, plog, producer[0]) == producer[1]):
                ongoing.append(tp)
    ask = [tp for tp in partitions if tp not in ongoing]
    verifier: TxnVerifier | None = broker.txn_verifier
    verified = None
    if ask and verifier is not None:
        verified = await verifier.verify(request.transactional_id, producer[0], producer[1], ask, add=add)
    if verified is None and add:
        known = [tp for tp in ask if tp in ends]  # a partition without a log here is refused by the append
        error = await broker.txn_coordinator.coordinator.handle_add_partitions(
            request.transactional_id, producer[0], producer[1], known, TV_2) if known else ErrorCode.NONE
        verified = dict.fromkeys(known, error)
    if ongoing:
        verified = {**(verified or {}), **dict.fromkeys(ongoing, ErrorCode.NONE)}
    if verified is not None:
        for tp, end in ends.items():
            plog = broker.topics.log(*tp)
            if plog is not None and broker.txn_index.state(plog).ended_since(producer[0], end):
                verified[tp] = ErrorCode.INVALID_TXN_STATE
    return verified


def first_batch_header(records) -> BatchHeader | None:
    """The first batch's header, or None for records that do not parse (the append refuses those)."""
    if not records:
        return None
    try:
        return parse_batch_header(records)
    except DecodeError:
        return None


def _topic_name(broker, topic_id) -> str | None:
    topic = broker.topics.by_id(topic_id)
    return topic.name if topic is not None else None


def _refusal(acks: int) -> Appended | None:
    """What every partition answers when the request itself is refused."""
    if acks not in (0, 1, -1):
        return Appended(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not 0, 1 or -1")
    return None


def _response(index: int, a: Appended, fsync_failed: bool):
    if fsync_failed:  # the append was cut away with the failed fsync: never acknowledged
        a = Appended(ErrorCode.KAFKA_STORAGE_ERROR, "fsync failed", log_start_offset=a.log_start_offset)
    return m.ProduceResponse.PartitionProduceResponse(
        index=index, error_code=a.error, base_offset=a.base_offset, log_append_time_ms=a.log_append_time_ms,
        log_start_offset=a.log_start_offset, record_errors=[], error_message=a.message)
