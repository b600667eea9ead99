"""Per-log configuration, with Kafka's topic-config names (snake_case) and defaults."""
from __future__ import annotations

import dataclasses

_DAY_MS = 24 * 60 * 60 * 1000


@dataclasses.dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1 << 30                 # segment.bytes
    segment_ms: int = 7 * _DAY_MS                # segment.ms
    index_interval_bytes: int = 4096             # index.interval.bytes
    cleanup_policy: str = "delete"               # cleanup.policy: "delete", "compact" or "compact,delete"
    retention_ms: int = 7 * _DAY_MS              # retention.ms (-1: keep forever)
    retention_bytes: int = -1                    # retention.bytes (-1: no size limit)
    delete_retention_ms: int = _DAY_MS           # delete.retention.ms: how long tombstones survive cleaning
    min_cleanable_dirty_ratio: float = 0.5       # min.cleanable.dirty.ratio
    flush_on_append: bool = True                 # every acknowledged append is fsynced (group commit)
    message_timestamp_type: str = "CreateTime"   # message.timestamp.type: "CreateTime" | "LogAppendTime"

    def __post_init__(self) -> None:
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"message_timestamp_type: {self.message_timestamp_type!r}")
        if not set(self.cleanup_policy.replace(" ", "").split(",")) <= {"delete", "compact"}:
            raise ValueError(f"cleanup_policy: {self.cleanup_policy!r}")
        # Kafka's bounds: index entries hold file positions as int32, so a segment stays below 2 GiB.
        if not 14 <= self.segment_bytes <= 2**31 - 1 or self.index_interval_bytes < 0:
            raise ValueError("segment_bytes / index_interval_bytes out of range")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(f"min_cleanable_dirty_ratio: {self.min_cleanable_dirty_ratio}")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def replace(self, **changes) -> LogConfig:
        return dataclasses.replace(self, **changes)
