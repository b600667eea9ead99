"""`cordoned.log.dirs` (KIP-1066, Kafka 4.3): the log directories where no new partition is placed, while
the partitions already in them keep serving. Pure: which values are valid and which directories they name.

Kafka's rules (ServerLogConfigs.CORDONED_LOG_DIRS_CONFIG, KafkaConfig's validation; core's
CordonedLogDirsIntegrationTest):
  - the value is a comma-separated list of entries of `log.dirs`, or "*" alone for all of them; empty (the
    default) cordons nothing;
  - it is a broker config, static (server.properties) or dynamic (IncrementalAlterConfigs on the BROKER
    resource of the node), and takes effect only from metadata.version 4.3-IV0: below it a static value is
    ignored (DescribeLogDirs reports no directory cordoned) and a dynamic change is refused (INVALID_CONFIG);
  - DescribeLogDirs v5 reports IsCordoned per directory; a partition cannot be created where every log
    directory of the broker is cordoned (CreateTopics / CreatePartitions: INVALID_REPLICATION_FACTOR).
kcoord compares entries as absolute paths, so a relative `log.dirs` and the absolute path DescribeLogDirs
reports name the same directory (Kafka 4.3.1 compares the strings: KAFKA-20901).
"""
from __future__ import annotations

import os
from collections.abc import Sequence

CORDONED_LOG_DIRS = "cordoned.log.dirs"
ALL = "*"


def refusal(entries: Sequence[str], log_dirs: Sequence[str]) -> str | None:
    """Why `entries` is no valid cordoned.log.dirs for a broker with `log_dirs`, or None."""
    if ALL in entries:
        return None if len(entries) == 1 else f"{CORDONED_LOG_DIRS}: '{ALL}' must be the only entry"
    known = {os.path.abspath(d) for d in log_dirs}
    unknown = [e for e in entries if os.path.abspath(e) not in known]
    if unknown:
        return (f"{CORDONED_LOG_DIRS}: {', '.join(unknown)} not in log.dirs "
                f"({', '.join(log_dirs)}); the entries must be log directories of this broker or '{ALL}'")
    return None


def is_cordoned(log_dir: str, entries: Sequence[str], supported: bool) -> bool:
    """Whether `log_dir` is cordoned by `entries`, at a metadata.version that does (`supported`) or not."""
    if not supported:
        return False
    return ALL in entries or os.path.abspath(log_dir) in {os.path.abspath(e) for e in entries}
