"""Codec speed: decode + encode of one message, our generated codecs against kafka-python 3.0's codec.

    python -m bench.codec [--quick]

Each row times `decode(bytes)` followed by `encode(obj)` of the same message, both codecs on the
same bytes (asserted identical first), and reports theirs / ours as a speed-up. Times are CPU time
of this process (time.process_time_ns). A repeat is one pair, ours then theirs back to back, so both
halves see the same machine load; the row shows the median time of each over the repeats, the
median of the per-pair ratios as the speed-up, and their interquartile range as its spread (a noisy
machine widens it). Target: >= 4x on every row.

Our encoders keep recently written strings with their length prefix (kcoord.protocol.primitives.STRINGS16);
repeating one message makes every string a hit, as in a broker answering the same groups again and
again. `speedup_cold_strings` is the same pair with that cache emptied before each of our
decode + encode: every string a miss, the worst case.
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time

import kafka
from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse
from kafka.protocol.consumer.group import HeartbeatRequest as KpHeartbeatRequest
from kafka.protocol.consumer.group import JoinGroupResponse as KpJoinGroupResponse
from kafka.protocol.consumer.group import OffsetCommitRequest as KpOffsetCommitRequest
from kafka.protocol.consumer.group import SyncGroupRequest as KpSyncGroupRequest

from kcoord.protocol import messages as m
from kcoord.protocol import primitives


def _heartbeat():
    return m.HeartbeatRequest(group_id="orders-consumers", generation_id=42,
                              member_id="consumer-1-5f0c7a4e-2b1d-4c55-9a0e-1f4b7c2d9e31",
                              group_instance_id=None)


def _join_group_response(members: int):
    member_ids = [f"consumer-{i}-5f0c7a4e-2b1d-4c55-9a0e-{i:012d}" for i in range(members)]
    return m.JoinGroupResponse(
        error_code=0, generation_id=7, protocol_name="range", leader=member_ids[0], member_id=member_ids[0],
        members=[m.JoinGroupResponse.JoinGroupResponseMember(
            member_id=mid, group_instance_id=None, metadata=b"\x00\x01" + b"\x00" * 40) for mid in member_ids])


def _sync_group_request(assignments: int):
    member_ids = [f"consumer-{i}-5f0c7a4e-2b1d-4c55-9a0e-{i:012d}" for i in range(assignments)]
    return m.SyncGroupRequest(
        group_id="orders-consumers", generation_id=7, member_id=member_ids[0], group_instance_id=None,
        assignments=[m.SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=mid, assignment=b"\x00\x01" + b"\x00" * 60) for mid in member_ids])


def _offset_commit_request(partitions: int):
    topics = [m.OffsetCommitRequest.OffsetCommitRequestTopic(name=f"topic-{t}", partitions=[
        m.OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=1_000_000 + p, committed_leader_epoch=3,
            committed_metadata="") for p in range(partitions // 4)]) for t in range(4)]
    return m.OffsetCommitRequest(group_id="orders-consumers", generation_id_or_member_epoch=7,
                                 member_id="consumer-1-5f0c7a4e-2b1d-4c55-9a0e-1f4b7c2d9e31",
                                 group_instance_id=None, topics=topics)


def _fetch_response(partitions: int):
    batch = b"\x00" * 512
    return m.FetchResponse(throttle_time_ms=0, error_code=0, session_id=12, responses=[
        m.FetchResponse.FetchableTopicResponse(topic="orders", partitions=[
            m.FetchResponse.PartitionData(partition_index=p, error_code=0, high_watermark=5000 + p,
                                          last_stable_offset=5000 + p, log_start_offset=0,
                                          aborted_transactions=None, preferred_read_replica=-1,
                                          records=batch) for p in range(partitions)])])


def cases(quick: bool):
    """(label, our message name, version, our object, kafka-python class)."""
    return [
        ("Heartbeat v4 request", "HeartbeatRequest", 4, _heartbeat(), KpHeartbeatRequest),
        ("JoinGroup v5 response, 50 members", "JoinGroupResponse", 5, _join_group_response(50),
         KpJoinGroupResponse),
        ("SyncGroup v5 request, 50 assignments", "SyncGroupRequest", 5, _sync_group_request(50),
         KpSyncGroupRequest),
        ("OffsetCommit v8 request, 100 partitions", "OffsetCommitRequest", 8, _offset_commit_request(100),
         KpOffsetCommitRequest),
        ("Fetch v12 response, 10 partitions", "FetchResponse", 12, _fetch_response(10), KpFetchResponse),
    ]


def _ns_per_op(fn, number: int) -> float:
    t0 = time.process_time_ns()
    for _ in range(number):
        fn()
    return (time.process_time_ns() - t0) / number


def _paired(fns, target_s: float, repeats: int) -> list[list[float]]:
    """Per repeat, ns/op of each of `fns` back to back (about the same load for all of them)."""
    numbers = [_calibrate(fn, target_s) for fn in fns]
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, number, out in zip(fns, numbers, times, strict=True):
            out.append(_ns_per_op(fn, number))
    return times


def _quartiles(values: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def _calibrate(fn, target_s: float) -> int:
    number = 1
    while True:
        t0 = time.process_time()
        for _ in range(number):
            fn()
        elapsed = time.process_time() - t0
        if elapsed >= target_s / 5 or number >= 1 << 20:
            return max(1, int(number * target_s / max(elapsed, 1e-9) / 5))
        number *= 2


def run(quick: bool = False) -> dict:
    repeats = 3 if quick else 21
    target_s = 0.03 if quick else 0.1
    rows = []
    for label, name, version, obj, kp_cls in cases(quick):
        codec = m.codec(name, version)
        data = codec.encode(obj)
        kp_obj = kp_cls.decode(data, version=version)
        assert kp_obj.encode() == data, f"{label}: codecs disagree"
        assert codec.decode(data)[0] == obj

        def ours(codec=codec, data=data):
            o, _ = codec.decode(data)
            codec.encode(o)

        def ours_cold(codec=codec, data=data):
            primitives.STRINGS16.clear()
            primitives.STRINGS_COMPACT.clear()
            o, _ = codec.decode(data)
            codec.encode(o)

        def theirs(kp_cls=kp_cls, data=data, version=version):
            kp_cls.decode(data, version=version).encode()

        ours_ns, theirs_ns, cold_ns = _paired([ours, theirs, ours_cold], target_s, repeats)
        ratios = [t / o for o, t in zip(ours_ns, theirs_ns, strict=True)]
        cold_ratios = [t / o for o, t in zip(cold_ns, theirs_ns, strict=True)]
        low, high = _quartiles(ratios)
        rows.append({
            "message": label,
            "bytes": len(data),
            "kcoord_us": round(statistics.median(ours_ns) / 1000, 2),
            "kafka_python_us": round(statistics.median(theirs_ns) / 1000, 2),
            "speedup": round(statistics.median(ratios), 2),
            "speedup_iqr": f"{low:.2f}-{high:.2f}",
            "speedup_cold_strings": round(statistics.median(cold_ratios), 2),
        })
    return {
        "name": "codec",
        "settings": {
            "measure": "decode(bytes) + encode(obj) per message, CPU time, medians of paired repeats",
            "repeats": repeats,
            "python": platform.python_version(),
            "kafka_python": kafka.__version__,
            "cores": os.cpu_count(),
            "quick": quick,
        },
        "rows": rows,
    }


def markdown(result: dict) -> str:
    cols = list(result["rows"][0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in result["rows"]]
    settings = ", ".join(f"{k}={v}" for k, v in result["settings"].items())
    return "\n".join(lines) + f"\n\n{settings}\n"


if __name__ == "__main__":
    print(markdown(run(quick="--quick" in sys.argv[1:])))
