"""Authorization guards of the transaction APIs, as KafkaApis applies them: WRITE on the transactional id
for InitProducerId, AddPartitionsToTxn (v0-3, with WRITE on each topic; v4+ is broker-to-broker:
CLUSTER_ACTION), AddOffsetsToTxn (with READ on the group), EndTxn and TxnOffsetCommit (with READ on the
group and on each topic); CLUSTER_ACTION for WriteTxnMarkers; DESCRIBE on the transactional id for
DescribeTransactions, ListTransactions listing only those; READ on the topic for DescribeProducers."""
from __future__ import annotations

from kcoord.broker.security import authorize_topics
from kcoord.broker.security.acl import AclOperation as Op
from kcoord.broker.security.acl import ResourceType
from kcoord.broker.security.check import allowed, cluster_allowed
from kcoord.broker.security.guard_util import split, then
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

TXN = ResourceType.TRANSACTIONAL_ID
TIDAF = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
GAF = ErrorCode.GROUP_AUTHORIZATION_FAILED
TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CAF = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _writes(ctx, transactional_id: str) -> bool:
    return allowed(ctx, Op.WRITE, TXN, transactional_id)


def init_producer_id(ctx, req, handler):
    if req.transactional_id is None:
        return authorize_topics.init_producer_id(ctx, req, handler)
    if not _writes(ctx, req.transactional_id):
        return m.InitProducerIdResponse(throttle_time_ms=0, error_code=TIDAF, producer_id=-1, producer_epoch=-1)
    return handler(ctx, req)


def add_partitions_to_txn(ctx, req, handler):
    R = m.AddPartitionsToTxnResponse
    if ctx.api_version >= 4:
        if not cluster_allowed(ctx, Op.CLUSTER_ACTION):
            return R(throttle_time_ms=0, error_code=CAF, results_by_transaction=[])
        return handler(ctx, req)
    topics = req.v3_and_below_topics
    if not _writes(ctx, req.v3_and_below_transactional_id):
        errors = {t.name: {p: TIDAF for p in t.partitions} for t in topics}
    else:
        _kept, refused = split(ctx, topics, lambda t: t.name, Op.WRITE)
        if not refused:
            return handler(ctx, req)
        refused_names = {t.name for t in refused}
        errors = {t.name: {p: TAF if t.name in refused_names else ErrorCode.OPERATION_NOT_ATTEMPTED
                           for p in t.partitions} for t in topics}
    return R(throttle_time_ms=0, results_by_topic_v3_and_below=[R.AddPartitionsToTxnTopicResult(
        name=name, results_by_partition=[R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=e)
                                         for p, e in parts.items()]) for name, parts in errors.items()])


def add_offsets_to_txn(ctx, req, handler):
    error = (TIDAF if not _writes(ctx, req.transactional_id)
             else GAF if not allowed(ctx, Op.READ, ResourceType.GROUP, req.group_id) else None)
    return handler(ctx, req) if error is None else m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)


def end_txn(ctx, req, handler):
    if not _writes(ctx, req.transactional_id):
        return m.EndTxnResponse(throttle_time_ms=0, error_code=TIDAF)
    return handler(ctx, req)


def txn_offset_commit(ctx, req, handler):
    R = m.TxnOffsetCommitResponse
    P = R.TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition

    def answer(topics, error):
        return [R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            P(partition_index=p.partition_index, error_code=error) for p in t.partitions]) for t in topics]

    error = (TIDAF if not _writes(ctx, req.transactional_id)
             else GAF if not allowed(ctx, Op.READ, ResourceType.GROUP, req.group_id) else None)
    if error is not None:
        return R(throttle_time_ms=0, topics=answer(req.topics, error))
    kept, refused = split(ctx, req.topics, lambda t: t.name, Op.READ)
    if not refused:
        return handler(ctx, req)
    if not kept:
        return R(throttle_time_ms=0, topics=answer(refused, TAF))
    req.topics = kept

    def amend(resp):
        resp.topics.extend(answer(refused, TAF))
        return resp

    return then(handler(ctx, req), amend)


def write_txn_markers(ctx, req, handler):
    if cluster_allowed(ctx, Op.CLUSTER_ACTION):
        return handler(ctx, req)
    R = m.WriteTxnMarkersResponse
    T = R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult
    return R(markers=[R.WritableTxnMarkerResult(producer_id=mk.producer_id, topics=[
        T(name=t.name, partitions=[T.WritableTxnMarkerPartitionResult(partition_index=p, error_code=CAF)
                                   for p in t.partition_indexes]) for t in mk.topics]) for mk in req.markers])


def describe_transactions(ctx, req, handler):
    refused = [t for t in req.transactional_ids if not allowed(ctx, Op.DESCRIBE, TXN, t)]
    if not refused:
        return handler(ctx, req)
    R = m.DescribeTransactionsResponse
    req.transactional_ids = [t for t in req.transactional_ids if t not in refused]

    def amend(resp):
        resp.transaction_states.extend(R.TransactionState(
            error_code=TIDAF, transactional_id=t, transaction_state="", transaction_timeout_ms=0,
            transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]) for t in refused)
        return resp

    return then(handler(ctx, req), amend)


def list_transactions(ctx, req, handler):
    def amend(resp):
        resp.transaction_states = [t for t in resp.transaction_states
                                   if allowed(ctx, Op.DESCRIBE, TXN, t.transactional_id)]
        return resp

    return then(handler(ctx, req), amend)


def describe_producers(ctx, req, handler):
    kept, refused = split(ctx, req.topics, lambda t: t.name, Op.READ)
    if not refused:
        return handler(ctx, req)
    R = m.DescribeProducersResponse
    T = R.TopicResponse
    entries = [T(name=t.name, partitions=[T.PartitionResponse(partition_index=p, error_code=TAF, error_message=None,
                                                              active_producers=[])
                                          for p in t.partition_indexes]) for t in refused]
    req.topics = kept

    def amend(resp):
        resp.topics.extend(entries)
        return resp

    return then(handler(ctx, req), amend)


GUARDS = {22: init_producer_id, 24: add_partitions_to_txn, 25: add_offsets_to_txn, 26: end_txn,
          28: txn_offset_commit, 27: write_txn_markers, 65: describe_transactions, 66: list_transactions,
          61: describe_producers}
