"""TransactionStateManager: the transactions of each `__transaction_state` partition this node serves
(Kafka's TransactionStateManager), changed only by replaying durable records.

`get_state(transactional_id)` answers what Kafka's getTransactionState does: COORDINATOR_LOAD_IN_PROGRESS
while the id's partition loads, NOT_COORDINATOR when it is not ours, else the metadata (or None).
Ids map to partitions as groups do: abs(java hash(id)) % transaction.state.log.num.partitions.

Each loaded partition has its coordinator epoch (Kafka's TxnMetadataCacheEntry.coordinatorEpoch): in
cluster mode the partition's leader epoch at the election that loaded it, 0 on a single node. Markers
carry it, so a partition leader refuses markers of a coordinator that was superseded.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kcoord.protocol.consumer_offsets import partition_for
from kcoord.protocol.errors import ErrorCode
from kcoord.txn.log_format import TransactionLogValue, decode_key, decode_value
from kcoord.txn.metadata import TransactionMetadata, TxnTransit

TRANSACTION_STATE_TOPIC = "__transaction_state"
# an id's partition is looked up several times a request (Java's String.hashCode in Python, ~6 µs):
# remembered for the ids in use, bounded
_partition_of = lru_cache(maxsize=1 << 16)(partition_for)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """The broker properties the coordinator reads (Kafka's TransactionStateManagerConfig and defaults)."""
    num_partitions: int = 50
    max_timeout_ms: int = 900000
    abort_timed_out_interval_ms: int = 10000
    id_expiration_ms: int = 604800000
    remove_expired_interval_ms: int = 3600000

    @classmethod
    def from_properties(cls, get) -> TxnConfig:
        return cls(get("transaction.state.log.num.partitions"), get("transaction.max.timeout.ms"),
                   get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
                   get("transactional.id.expiration.ms"),
                   get("transaction.remove.expired.transaction.cleanup.interval.ms"))


class TransactionStateManager:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self.partitions: dict[int, dict[str, TransactionMetadata]] = {}  # loaded
        self.loading: set[int] = set()
        self.coordinator_epochs: dict[int, int] = {}  # loaded partition -> its coordinator epoch

    def partition_for(self, transactional_id: str) -> int:
        return _partition_of(transactional_id, self.config.num_partitions)

    def validate_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.max_timeout_ms

    def get_state(self, transactional_id: str) -> ErrorCode | TransactionMetadata | None:
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        txns = self.partitions.get(partition)
        if txns is None:
            return ErrorCode.NOT_COORDINATOR
        return txns.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """A new id's metadata before its first record (Kafka's putTransactionStateIfNotExists)."""
        txns = self.partitions[self.partition_for(metadata.transactional_id)]
        return txns.setdefault(metadata.transactional_id, metadata)

    def remove_if_unwritten(self, metadata: TransactionMetadata) -> None:
        """Forget a new id whose first record could not be written (a failed append changes nothing)."""
        txns = self.partitions.get(self.partition_for(metadata.transactional_id), {})
        if txns.get(metadata.transactional_id) is metadata and not metadata.pending:
            del txns[metadata.transactional_id]

    def all(self):
        for txns in self.partitions.values():
            yield from txns.values()

    # ------------------------------------------------------------ replay

    def replay(self, partition: int, key: bytes, value: bytes | None, transit: TxnTransit | None = None) -> None:
        """Apply one durable record of `partition` (live, with its transit; or read by a load)."""
        txns = self.partitions.get(partition)
        if txns is None:
            return  # unloaded meanwhile
        transactional_id = decode_key(key)
        if value is None:
            txns.pop(transactional_id, None)
            return
        self.replay_value(txns, transactional_id, decode_value(value), transit)

    @staticmethod
    def replay_value(txns: dict[str, TransactionMetadata], transactional_id: str, value: TransactionLogValue,
                     transit: TxnTransit | None) -> None:
        md = txns.get(transactional_id)
        if md is None:
            txns[transactional_id] = TransactionMetadata.from_value(transactional_id, value)
        else:
            md.complete_transition(transit, value)

    def begin_load(self, partition: int) -> None:
        self.partitions.pop(partition, None)
        self.coordinator_epochs.pop(partition, None)
        self.loading.add(partition)

    def load(self, partition: int, records) -> dict[str, TransactionMetadata]:
        """Replay a partition's records ((key, value), oldest first) into a fresh table."""
        txns: dict[str, TransactionMetadata] = {}
        for key, value in records:
            if key is None:
                continue
            transactional_id = decode_key(key)
            if value is None:
                txns.pop(transactional_id, None)
            else:
                self.replay_value(txns, transactional_id, decode_value(value), None)
        return txns

    def complete_load(self, partition: int, txns: dict[str, TransactionMetadata], coordinator_epoch: int = 0) -> None:
        self.loading.discard(partition)
        self.partitions[partition] = txns
        self.coordinator_epochs[partition] = coordinator_epoch

    def coordinator_epoch(self, partition: int) -> int | None:
        """The loaded partition's coordinator epoch; None while it is not loaded here."""
        return self.coordinator_epochs.get(partition) if partition in self.partitions else None

    def unload(self, partition: int) -> None:
        self.loading.discard(partition)
        self.partitions.pop(partition, None)
        self.coordinator_epochs.pop(partition, None)
