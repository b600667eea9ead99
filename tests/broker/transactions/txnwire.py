"""Raw transactional requests for the wire-level tests (RawKafka: exact requests, decoded responses)."""
from __future__ import annotations

import time

from kcoord.protocol import messages as m
from kcoord.protocol.records import build_batch

INIT, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_COMMIT, PRODUCE, FETCH = 22, 24, 25, 26, 28, 0, 1


def init_pid(raw, txn_id, timeout_ms=60000, version=4, producer_id=-1, epoch=-1):
    resp = raw.request(INIT, version, m.InitProducerIdRequest(
        transactional_id=txn_id, transaction_timeout_ms=timeout_ms, producer_id=producer_id, producer_epoch=epoch))
    return resp.error_code, resp.producer_id, resp.producer_epoch


def init_until_ready(raw, txn_id, **kw):
    """InitProducerId, retried while it answers COORDINATOR_LOAD_IN_PROGRESS (14) or CONCURRENT_TRANSACTIONS
    (51), as clients do."""
    for _ in range(400):
        got = init_pid(raw, txn_id, **kw)
        if got[0] not in (14, 51):
            return got
        time.sleep(0.05)
    raise AssertionError(f"InitProducerId kept answering {got[0]}")


def add_partitions(raw, txn_id, pid, epoch, partitions, version=3) -> dict:
    T = m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    topics = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    resp = raw.request(ADD_PARTITIONS, version, m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.partition_error_code
            for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}


def add_offsets(raw, txn_id, pid, epoch, group, version=3) -> int:
    return raw.request(ADD_OFFSETS, version, m.AddOffsetsToTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, group_id=group)).error_code


def end_txn(raw, txn_id, pid, epoch, commit, version=3) -> int:
    return raw.request(END_TXN, version, m.EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)).error_code


def txn_commit(raw, txn_id, pid, epoch, group, offsets, version=3, generation=-1, member="") -> dict:
    R = m.TxnOffsetCommitRequest
    topics = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append(R.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
            partition_index=p, committed_offset=off, committed_leader_epoch=-1, committed_metadata=""))
    resp = raw.request(TXN_COMMIT, version, R(
        transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=generation,
        member_id=member, group_instance_id=None,
        topics=[R.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()]))
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def produce_txn(raw, txn_id, pid, epoch, topic, partition, values, sequence=0, version=9) -> int:
    batch = build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                        transactional=True)
    R = m.ProduceRequest
    resp = raw.request(PRODUCE, version, R(transactional_id=txn_id, acks=-1, timeout_ms=10000, topic_data=[
        R.TopicProduceData(name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(
            index=partition, records=batch)])]))
    return resp.responses[0].partition_responses[0].error_code
