"""TransactionMetadata: one transactional id's state, and the transitions the coordinator prepares
(Kafka's TransactionMetadata.scala / TransactionState).

A transition is prepared as a `TxnTransit` (the value the record will carry) and sets `pending_state`,
so concurrent requests answer CONCURRENT_TRANSACTIONS; the metadata changes only when the record is
durable and replayed (`complete_transition`), or the pending state is dropped if the append failed.

States (ids as in the log, TransactionState.scala) and what leads where:
  EMPTY (0)           no transaction: InitProducerId (epoch bump) stays here; AddPartitions -> ONGOING
  ONGOING (1)         AddPartitions adds; EndTxn -> PREPARE_COMMIT / PREPARE_ABORT; InitProducerId or the
                      timeout fence the producer (epoch + 1) -> PREPARE_ABORT
  PREPARE_COMMIT (2)  durable: the client is answered, markers are written -> COMPLETE_COMMIT
  PREPARE_ABORT (3)   likewise -> COMPLETE_ABORT
  COMPLETE_COMMIT (4) / COMPLETE_ABORT (5): like EMPTY, partitions cleared
  DEAD (6)            an expired transactional id (never written by kcoord)
  PREPARE_EPOCH_FENCE (7) in memory only: the fence that precedes an abort the coordinator starts

Transaction version 2 (KIP-890 part 2; TransactionMetadata.prepareAbortOrCommit / prepareComplete): a
transaction ended by a TV2 client (EndTxn v5) writes PrepareCommit/PrepareAbort at the epoch + 1 (the
markers carry it, fencing any late write of the old epoch), remembering the old one as the last epoch; a
client whose epoch is exhausted gets a new producer id, written as NextProducerId on the Prepare record
and taken (at epoch 0, the old id kept as the previous one) by the Complete record. `client_version` is the
transaction version of the client behind the last transition (ClientTransactionVersion in the log).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kcoord.txn.log_format import TransactionLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767
TV_0, TV_1, TV_2 = 0, 1, 2  # TransactionVersion levels; TV_2 bumps the epoch at every transaction end


def supports_epoch_bump(client_version: int) -> bool:
    return client_version >= TV_2


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name admin tools show (DescribeTransactions / ListTransactions)."""
        return "".join(w.capitalize() for w in self.name.split("_"))


S = TxnState
# Kafka's TransactionState.validPreviousStates
VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    # from a complete state only by a TV2 client's abort of a transaction it cannot know is empty
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}
COMPLETE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """A prepared transition: the record's value plus the in-memory last epoch (not in the v0 log)."""
    value: TransactionLogValue
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID

    @property
    def state(self) -> TxnState:
        return TxnState(self.value.status)


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60000
    state: TxnState = S.EMPTY
    partitions: set = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending_state: TxnState | None = None
    next_producer_id: int = NO_PRODUCER_ID  # TV2: the id an exhausted epoch moves to on completion
    client_version: int = TV_0  # the client's transaction version at the last transition

    @classmethod
    def from_value(cls, transactional_id: str, v: TransactionLogValue) -> TransactionMetadata:
        """As a load builds it (TransactionLog.readTxnRecordValue)."""
        return cls(transactional_id, v.producer_id, v.producer_epoch, NO_PRODUCER_EPOCH, v.previous_producer_id,
                   v.timeout_ms, TxnState(v.status), set(v.partitions or ()), v.start_ms, v.last_update_ms,
                   next_producer_id=v.next_producer_id, client_version=v.client_transaction_version)

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # ------------------------------------------------------------ transitions (prepare)

    def _transit(self, state: TxnState, *, producer_id: int | None = None, epoch: int | None = None,
                 last_epoch: int | None = None, timeout_ms: int | None = None, partitions=None,
                 start_ms: int | None = None, now_ms: int, previous_producer_id: int | None = None,
                 next_producer_id: int = NO_PRODUCER_ID, client_version: int | None = None) -> TxnTransit:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.name} -> {state.name}")
        parts = self.partitions if partitions is None else partitions
        previous = self.previous_producer_id if previous_producer_id is None else previous_producer_id
        value = TransactionLogValue(
            self.producer_id if producer_id is None else producer_id,
            self.producer_epoch if epoch is None else epoch,
            self.timeout_ms if timeout_ms is None else timeout_ms, int(state),
            None if state == S.EMPTY else tuple(sorted(parts)),
            now_ms, self.start_ms if start_ms is None else start_ms, previous, next_producer_id,
            self.client_version if client_version is None else client_version)
        self.pending_state = state
        return TxnTransit(value, self.last_producer_epoch if last_epoch is None else last_epoch, previous)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransit | str:
        """InitProducerId on a complete transaction: the epoch + 1 (KIP-360 retries keep it). A str names
        the error ("PRODUCER_FENCED")."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry of a bump that succeeded
        else:
            return "PRODUCER_FENCED"
        return self._transit(S.EMPTY, epoch=epoch, last_epoch=last, timeout_ms=timeout_ms, partitions=set(),
                             start_ms=-1, now_ms=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        return self._transit(S.EMPTY, producer_id=new_producer_id, epoch=0,
                             last_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             previous_producer_id=self.producer_id, timeout_ms=timeout_ms, partitions=set(),
                             start_ms=-1, now_ms=now_ms)

    def prepare_fence_producer_epoch(self) -> None:
        """The coordinator aborts this transaction itself: the epoch it writes is one more, fencing the
        producer."""
        if self.state not in VALID_PREVIOUS[S.PREPARE_EPOCH_FENCE]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.name} -> PREPARE_EPOCH_FENCE")
        self.pending_state = S.PREPARE_EPOCH_FENCE

    def fenced_epoch(self) -> int:
        """One more than the epoch, also when an earlier fence failed to be written: the epoch here changes
        only with a durable record, so a retry computes the same fence without climbing (what Kafka's
        hasFailedEpochFence guards against, KAFKA-9666). Never the same epoch: a TV2 marker must be above
        the producer's epoch at each partition (KIP-1228). Short.MaxValue is the ceiling."""
        return min(self.producer_epoch + 1, MAX_EPOCH)

    def prepare_add_partitions(self, added: set, now_ms: int, client_version: int | None = None) -> TxnTransit:
        start = now_ms if self.state in COMPLETE else self.start_ms
        return self._transit(S.ONGOING, partitions=self.partitions | set(added), start_ms=start, now_ms=now_ms,
                             client_version=client_version)

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int, fenced_epoch: int | None = None,
                                client_version: int = TV_0, next_producer_id: int = NO_PRODUCER_ID) -> TxnTransit:
        """A TV2 end writes the epoch + 1 and keeps the current one as the last epoch, so a retry of this
        EndTxn is recognised. `fenced_epoch`: the coordinator's own abort, already one more, which is not
        bumped again (KAFKA-19367: a second bump could overflow the epoch)."""
        if fenced_epoch is not None:
            last = self.producer_epoch if supports_epoch_bump(client_version) else None
            return self._transit(state, epoch=fenced_epoch, last_epoch=last, now_ms=now_ms,
                                 client_version=client_version)
        if supports_epoch_bump(client_version):
            empty = self.state in COMPLETE  # an empty abort: no partitions, started now
            return self._transit(state, epoch=self.producer_epoch + 1, last_epoch=self.producer_epoch, now_ms=now_ms,
                                 next_producer_id=next_producer_id, client_version=client_version,
                                 partitions=set() if empty else None, start_ms=now_ms if empty else None)
        return self._transit(state, now_ms=now_ms, client_version=client_version)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """CompleteCommit/CompleteAbort once the markers are written; a TV2 transaction whose epoch ran out
        moves to its next producer id at epoch 0 here (the markers carried the old id)."""
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if supports_epoch_bump(self.client_version) and self.next_producer_id != NO_PRODUCER_ID:
            return self._transit(state, producer_id=self.next_producer_id, epoch=0, last_epoch=self.producer_epoch,
                                 previous_producer_id=self.producer_id, partitions=set(), now_ms=now_ms)
        return self._transit(state, partitions=set(), now_ms=now_ms,
                             last_epoch=self.producer_epoch if supports_epoch_bump(self.client_version) else None)

    # ------------------------------------------------------------ replay

    def complete_transition(self, transit: TxnTransit | None, value: TransactionLogValue) -> None:
        """Apply a durable record of this id (`transit` None: read from the log by a load)."""
        self.producer_id = value.producer_id
        self.producer_epoch = value.producer_epoch
        self.timeout_ms = value.timeout_ms
        self.state = TxnState(value.status)
        self.partitions = set(value.partitions or ())
        self.start_ms = value.start_ms
        self.last_update_ms = value.last_update_ms
        self.next_producer_id = value.next_producer_id
        self.client_version = value.client_transaction_version
        if transit is not None:
            self.last_producer_epoch = transit.last_producer_epoch
            self.previous_producer_id = transit.previous_producer_id
        elif value.previous_producer_id != NO_PRODUCER_ID:
            self.previous_producer_id = value.previous_producer_id
        self.pending_state = None


class IllegalTransition(Exception):
    """A transition Kafka's state machine does not allow (a bug, never a client error)."""
