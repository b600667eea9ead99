"""DescribeLogDirs (key 35): the log directory and, per partition in it, its size and offset lag.

Versions (we serve 1-5, as Kafka 4.3):
  v1: throttle_time_ms (v0 was removed in Kafka 4.0)
  v2: flexible
  v3: top-level error_code
  v4: total_bytes and usable_bytes of the volume (KIP-827)
  v5: is_cordoned (KIP-1066): the directory is in `cordoned.log.dirs` and metadata.version is 4.3-IV0 or
      later (kcoord.metadata.cordoned_log_dirs); below v5 the field is not sent
As Kafka's ReplicaManager.describeLogDirs: topics null = every partition; requested partitions that are
not in the directory are left out; partition_size is the bytes of its segments; offset_lag is the log
end minus the high watermark (what is written but not yet durable); is_future_key is false (no
AlterReplicaLogDirs). One directory: log.dirs' first entry, the one kcoord writes to.
Cluster mode: each node answers for its own directory, and lists only the partitions its metadata image
says it holds a replica of (a log left behind by a replica moved away is not one of them).
"""
from __future__ import annotations

import os

from kcoord.broker.context import RequestContext
from kcoord.broker.data.visibility import high_watermark
from kcoord.broker.registry import api
from kcoord.metadata.cordoned_log_dirs import CORDONED_LOG_DIRS, is_cordoned
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=35, name="DescribeLogDirs", min_version=1, max_version=5)
async def handle(ctx: RequestContext, request: m.DescribeLogDirsRequest):
    broker = ctx.broker
    by_topic = broker.logs.topics()  # {topic: [partitions]} present on disk
    if broker.cluster is not None:
        image, node = broker.cluster.image, broker.node_id
        held = {(tp.topic, tp.partition) for tp, part in image.partitions() if node in part.registration.replicas}
        by_topic = {t: ps for t, ps in ((t, [p for p in ps if (t, p) in held]) for t, ps in by_topic.items()) if ps}
    if request.topics is None:
        wanted = sorted(by_topic.items())
    else:
        wanted = [(t.topic, [p for p in t.partitions if p in by_topic.get(t.topic, ())]) for t in request.topics]
    R = m.DescribeLogDirsResponse
    topics = []
    for name, partitions in wanted:
        parts = []
        for p in partitions:
            plog = broker.logs.get(name, p)
            if plog is None or plog.closed:
                continue
            parts.append(R.DescribeLogDirsPartition(
                partition_index=p, partition_size=plog.size_bytes,
                offset_lag=max(plog.log_end_offset - high_watermark(plog), 0), is_future_key=False))
        if parts:
            topics.append(R.DescribeLogDirsTopic(name=name, partitions=parts))
    log_dir = os.path.abspath(broker.log_dir)
    total, usable = _volume(log_dir)
    cordoned = is_cordoned(log_dir, broker.config.get(CORDONED_LOG_DIRS), broker.features.cordoning_supported())
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[R.DescribeLogDirsResult(
        error_code=ErrorCode.NONE, log_dir=log_dir, topics=topics, total_bytes=total, usable_bytes=usable,
        is_cordoned=cordoned)])


def _volume(path: str) -> tuple[int, int]:
    """Total and usable bytes of the file system holding `path` (-1, -1 when unknown), as Kafka's
    FileStore.getTotalSpace / getUsableSpace."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
