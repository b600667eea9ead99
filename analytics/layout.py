"""Finding partition directories and segment files under Kafka-style log dirs.

Spark's file listing skips names that start with `_` (so it would never see `__consumer_offsets-N`),
which is why we list the directories ourselves: `<log dir>/<topic>-<partition>/<20 digits>.log`.
"""
import os
import re
from dataclasses import dataclass

from kcoord.protocol.consumer_offsets import OFFSETS_TOPIC as OFFSETS_TOPIC  # re-exported

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_SEGMENT = re.compile(r"^(?P<base>\d{20})\.log$")


@dataclass(frozen=True, order=True)
class Segment:
    topic: str
    partition: int
    base_offset: int
    path: str
    size: int


def split_log_dirs(values) -> list[str]:
    """`--log-dirs` takes Kafka's comma-separated form, possibly repeated."""
    if isinstance(values, str):
        values = [values]
    return [d.strip() for v in values for d in v.split(",") if d.strip()]


def list_segments(log_dirs, topics=None) -> list[Segment]:
    """Every segment of every partition, ordered by (topic, partition, base offset).

    Directories that do not look like `<topic>-<n>` (checkpoints, `-delete` dirs, ...) are ignored.
    """
    found = []
    for root in split_log_dirs(log_dirs):
        try:
            entries = os.scandir(root)
        except FileNotFoundError:
            continue
        with entries:
            for entry in entries:
                m = _PARTITION_DIR.match(entry.name)
                if not m or not entry.is_dir():
                    continue
                topic = m["topic"]
                if topics is not None and topic not in topics:
                    continue
                found.extend(_segments_of(entry.path, topic, int(m["partition"])))
    return sorted(found)


def _segments_of(path, topic, partition):
    with os.scandir(path) as files:
        for f in files:
            m = _SEGMENT.match(f.name)
            if m and f.is_file():
                yield Segment(topic, partition, int(m["base"]), f.path, f.stat().st_size)


def data_segments(log_dirs) -> list[Segment]:
    """Segments of the topics consumers read: not the internal `__`-prefixed ones."""
    return [s for s in list_segments(log_dirs) if not s.topic.startswith("__")]


def following(segment: Segment, segments: list[Segment]) -> list[Segment]:
    """The segments of the same partition after `segment`, in log order."""
    return [s for s in segments
            if (s.topic, s.partition) == (segment.topic, segment.partition)
            and s.base_offset > segment.base_offset]
