"""The share coordinator on one node: Kafka's ShareCoordinatorShard reduced to its log. A share-partition's
records (kcoord.share.records: ShareSnapshot / ShareUpdate, Kafka's formats) go to the partition of
`__share_group_state` its key hashes to (SharePartitionKey.asCoordinatorKey, Kafka's partitionFor), one
batch per write, acknowledged once fsynced; at start every partition of the topic is read back and the
records grouped by share-partition, for SharePartition.load to replay. A ShareSnapshot key with a null
value (a tombstone: DeleteShareGroupOffsets) drops what came before it for that share-partition.

Pruning (ShareCoordinatorShard's last-redundant offset, Kafka's share.coordinator.state.topic.prune):
a share-partition needs nothing before its latest snapshot, so once a snapshot is written the log start
of its __share_group_state partition moves up to the oldest latest-snapshot of the share-partitions
living there; the segments below go with retention, and a load reads only what is left.

The topic is created on the first write with `share.coordinator.state.topic.num.partitions`, under the
delete policy with no retention (Kafka prunes it with DeleteRecords once snapshots supersede old
records; kcoord keeps them all: compaction would keep only the last update of a key). Cluster mode
(kcoord.broker.share.coordinator_service) is another owner: this one serves a single node only.
"""
from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING

from kcoord.coordinator.common.runtime import APPEND_ERRORS
from kcoord.protocol.errors import DecodeError, ErrorCode
from kcoord.protocol.record_kv import batch_key_values
from kcoord.protocol.records import build_batch
from kcoord.share import records as r
from kcoord.storage import StorageError

if TYPE_CHECKING:
    from kcoord.broker.app import Broker

log = logging.getLogger("kcoord.share")

SHARE_GROUP_STATE = "__share_group_state"
ShareKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


def share_state_configs() -> dict[str, str]:
    return {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}


class ShareCoordinator:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.num_partitions: int = broker.config.get("share.coordinator.state.topic.num.partitions")
        self.active = False
        self._snapshot_at: dict[ShareKey, int] = {}  # offset of each share-partition's latest snapshot
        self._keys_in: dict[int, set[ShareKey]] = defaultdict(set)  # state partition -> its share-partitions

    def partition_for(self, key: ShareKey) -> int:
        topic = self.broker.topics.get(SHARE_GROUP_STATE)
        count = topic.partitions if topic is not None else self.num_partitions
        return r.share_state_partition(*key, count)

    def load(self) -> dict[ShareKey, list]:
        """Every share-partition's records, in log order (an undecodable record is skipped and logged)."""
        out: dict[ShareKey, list] = defaultdict(list)
        topic = self.broker.topics.get(SHARE_GROUP_STATE)
        if topic is not None:
            for partition in range(topic.partitions):
                plog = self.broker.logs.get(SHARE_GROUP_STATE, partition)
                if plog is None:
                    continue
                for header, batch in plog.batches(max_offset=plog.log_end_offset):
                    if header.is_control:
                        continue
                    for i, (key, value) in enumerate(batch_key_values(batch, header)):
                        gone = r.deleted(key, value)
                        if gone is not None:
                            out.pop(gone, None)
                            self._forget(partition, gone)
                            continue
                        try:
                            record = r.decode(key, value)
                        except DecodeError as e:
                            log.warning("skipping undecodable %s-%d record: %s", SHARE_GROUP_STATE, partition, e)
                            continue
                        share_key = (record.group_id, record.topic_id, record.partition)
                        out[share_key].append((key, value))
                        self._keys_in[partition].add(share_key)
                        if record.type == r.SHARE_SNAPSHOT:
                            self._snapshot_at[share_key] = header.base_offset + i
        self.active = True
        return out

    async def write(self, key: ShareKey, records: list) -> ErrorCode:
        """Append `records` (ShareWrite: key, value, headers) as one batch and wait for its fsync."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.broker.topics.get(SHARE_GROUP_STATE) is None:
            self.broker.topics.create(SHARE_GROUP_STATE, self.num_partitions, share_state_configs())
        partition = self.partition_for(key)
        try:
            plog = self.broker.logs.get_or_create(SHARE_GROUP_STATE, partition)
            info = await plog.append_durable(bytearray(build_batch([(k, v) for k, v, _h in records])))
        except StorageError as exc:
            log.error("append to %s-%d failed: %s", SHARE_GROUP_STATE, partition, exc)
            return APPEND_ERRORS.get(exc.error_code, exc.error_code)
        snapshots = [info.base_offset + i for i, (k, v, _h) in enumerate(records)
                     if v is not None and r.record_type(k) == r.SHARE_SNAPSHOT]
        if any(v is None for _k, v, _h in records):
            self._forget(partition, key)
        elif snapshots:
            self._keys_in[partition].add(key)
            self._snapshot_at[key] = snapshots[-1]
            self._prune(partition, plog)
        return ErrorCode.NONE

    def _forget(self, partition: int, key: ShareKey) -> None:
        self._keys_in[partition].discard(key)
        self._snapshot_at.pop(key, None)

    def _prune(self, partition: int, plog) -> None:
        """Move the partition's log start up to the oldest latest-snapshot of its share-partitions."""
        keys = self._keys_in[partition]
        if not keys or any(k not in self._snapshot_at for k in keys):
            return
        redundant = min(self._snapshot_at[k] for k in keys)
        try:
            if plog.maybe_increment_log_start_offset(redundant):
                self.broker.logs.write_log_start_checkpoint()
        except StorageError as exc:  # pruning is an optimisation: the records stay, a load replays them
            log.warning("cannot prune %s-%d to %d: %s", SHARE_GROUP_STATE, partition, redundant, exc)
