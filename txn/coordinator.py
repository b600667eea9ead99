"""TransactionCoordinator: InitProducerId, AddPartitionsToTxn (and its verify-only form), AddOffsetsToTxn,
EndTxn and the timeout abort (Kafka's TransactionCoordinator.scala), for clients of transaction version 1
and 2 (KIP-890 part 2: the epoch bumped at every end, kcoord.txn.metadata).

Each handler validates against the metadata, prepares a transition (TxnTransit: the record's value) and
awaits its append to `__transaction_state-N`; the metadata changes only when the record is durable, by
the replay a load also uses (TransactionStateManager.replay). While a transition is in flight the id
answers CONCURRENT_TRANSACTIONS. EndTxn answers once PrepareCommit/PrepareAbort is durable, as Kafka's
handleEndTransaction does; the markers are then written to every partition of the transaction (data
partitions and `__consumer_offsets`), durable, and only after that CompleteCommit/CompleteAbort -- so a
crash in between completes the transaction when the partition is loaded again (`on_loaded`), never half
of it. The Complete record is appended without waiting for its fsync (`append_unsynced`): nothing is
acknowledged on it, the next write of its partition (the producer's next AddPartitionsToTxn /
AddOffsetsToTxn / InitProducerId) is fsynced together with it, and a crash before that leaves the
Prepare record, which a load completes again (markers of an ended transaction change nothing).

A request of the id that comes while its markers are being written (the producer's next transaction,
an EndTxn retry, a new producer's InitProducerId) first waits for them (`wait_completed`, bounded), so
it finds the transaction complete instead of answering CONCURRENT_TRANSACTIONS and sending the client
into its retry backoff (100 ms in librdkafka); past the bound it answers as Kafka does.

Injected: `append(partition, key, value) -> ErrorCode` (awaits durability; in a cluster, the ISR),
`append_unsynced(partition, key, value) -> ErrorCode` (the same without awaiting the fsync; default
`append`), `wait_completed(transactional_id)` (returns once the id's marker work is done or a bound
passed; default: at once),
`write_markers(producer_id, epoch, commit, partitions, coordinator_epoch, transaction_version=)` (awaits
every marker durable, retrying itself; the coordinator epoch is the id's partition's, which each partition
leader checks, and the transaction's client version goes with it as WriteTxnMarkers v2 carries it),
`allocate_producer_id()` (a new id, or the error InitProducerId answers when none can be given now, as
RPCProducerIdManager's COORDINATOR_LOAD_IN_PROGRESS), `clock.now_ms()`, `spawn(coroutine, key)` for work
that outlives the request (keyed by transactional id for the markers), `sleep(seconds)`.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from kcoord.protocol.errors import ErrorCode
from kcoord.txn.log_format import encode_key, encode_value
from kcoord.txn.metadata import (
    COMPLETE,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TV_1,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
    supports_epoch_bump,
)
from kcoord.txn.state_manager import TransactionStateManager

E = ErrorCode
S = TxnState
TopicPartition = tuple[str, int]
log = logging.getLogger("kcoord.txn")
RETRY_BACKOFF_S = 0.5


async def _no_wait(_transactional_id: str) -> None:
    return None


class CoordinatorFenced(Exception):
    """Raised by `write_markers`: a partition leader has seen markers of this producer from a newer
    coordinator epoch, so this coordinator stops completing the transaction (the marker channel's
    abortSending in Kafka); the newer coordinator completes it."""


class TransactionCoordinator:
    def __init__(self, state: TransactionStateManager, *, append: Callable[[int, bytes, bytes], Awaitable[ErrorCode]],
                 write_markers: Callable[..., Awaitable[None]],
                 allocate_producer_id: Callable[[], int | ErrorCode], clock, spawn: Callable[..., None],
                 sleep: Callable[[float], Awaitable[None]],
                 transaction_version: Callable[[], int] = lambda: TV_0,
                 append_unsynced: Callable[[int, bytes, bytes], Awaitable[ErrorCode]] | None = None,
                 wait_completed: Callable[[str], Awaitable[None]] | None = None) -> None:
        self.state = state
        self._append_record = append
        self._append_unsynced = append_unsynced or append
        self._wait_completed = wait_completed or _no_wait
        self._write_markers = write_markers
        self._allocate = allocate_producer_id
        self.clock = clock
        self._spawn = spawn
        self._sleep = sleep
        # the finalized transaction.version: the log value's version (0 at TV_0, else 1:
        # TransactionVersion.transactionLogValueVersion) and the version of the coordinator's own aborts
        self.transaction_version = transaction_version
        self.active = True

    # ------------------------------------------------------------ records out, replay in

    async def _append(self, md: TransactionMetadata, transit: TxnTransit, *, synced: bool = True) -> ErrorCode:
        partition = self.state.partition_for(md.transactional_id)
        log_version = 1 if self.transaction_version() >= TV_1 else 0
        key, value = encode_key(md.transactional_id), encode_value(transit.value, log_version)
        append = self._append_record if synced else self._append_unsynced
        error = await append(partition, key, value)
        if error == E.NONE:
            self.state.replay(partition, key, value, transit)
        else:
            md.pending_state = None
            log.info("appending %s of %s failed: %s", transit.state.name, md.transactional_id, error.name)
        return error

    def _lookup(self, transactional_id: str | None) -> ErrorCode | TransactionMetadata | None:
        if not self.active:
            return E.COORDINATOR_NOT_AVAILABLE
        if not transactional_id:
            return E.INVALID_REQUEST
        return self.state.get_state(transactional_id)

    def _producer(self, transactional_id: str, producer_id: int, epoch: int) -> ErrorCode | TransactionMetadata:
        """The id's metadata if the producer id and epoch are its current ones, else the error: unknown id
        or producer id INVALID_PRODUCER_ID_MAPPING, another epoch PRODUCER_FENCED."""
        md = self._lookup(transactional_id)
        if md is None or (not isinstance(md, ErrorCode) and md.producer_id != producer_id):
            return E.INVALID_PRODUCER_ID_MAPPING
        if not isinstance(md, ErrorCode) and md.producer_epoch != epoch:
            return E.PRODUCER_FENCED
        return md

    # ------------------------------------------------------------ InitProducerId

    async def handle_init_producer_id(self, transactional_id: str, timeout_ms: int,
                                      expected: tuple[int, int] | None) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional id; `expected` (producer id, epoch) from v3 (KIP-360)."""
        if transactional_id == "":
            return E.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not self.state.validate_timeout(timeout_ms):
            return E.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        await self._wait_completed(transactional_id)
        md = self._lookup(transactional_id)
        if isinstance(md, ErrorCode):
            return md, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if md is None:
            producer_id = self._allocate()
            if isinstance(producer_id, ErrorCode):  # no id to give now (a cluster node without a block yet)
                return producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            md = self.state.put_if_absent(TransactionMetadata(
                transactional_id, producer_id, timeout_ms=timeout_ms, last_update_ms=self.clock.now_ms()))
        result = self._prepare_init(md, timeout_ms, expected)
        if isinstance(result, ErrorCode):
            return result, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if result is None:  # Ongoing: abort it with a fenced epoch; the client retries
            error = await self._abort_fenced(md)
            return (E.CONCURRENT_TRANSACTIONS if error == E.NONE else error), NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        error = await self._append(md, result)
        if error != E.NONE:
            if md.producer_epoch == NO_PRODUCER_EPOCH:  # never written: the new id leaves no trace
                self.state.remove_if_unwritten(md)
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        log.info("Initialized transactionalId %s with producerId %d and producer epoch %d", transactional_id,
                 md.producer_id, md.producer_epoch)
        return E.NONE, md.producer_id, md.producer_epoch

    def _prepare_init(self, md: TransactionMetadata, timeout_ms: int,
                      expected: tuple[int, int] | None) -> ErrorCode | TxnTransit | None:
        if md.pending:
            return E.CONCURRENT_TRANSACTIONS
        if expected is not None and not self._valid_expected(md, *expected):
            return E.PRODUCER_FENCED
        now = self.clock.now_ms()
        match md.state:
            case S.PREPARE_COMMIT | S.PREPARE_ABORT:
                return E.CONCURRENT_TRANSACTIONS
            case S.EMPTY | S.COMPLETE_COMMIT | S.COMPLETE_ABORT:
                if md.is_epoch_exhausted() and (expected is None or expected[1] == md.producer_epoch):
                    producer_id = self._allocate()
                    if isinstance(producer_id, ErrorCode):
                        return producer_id
                    return md.prepare_producer_id_rotation(producer_id, timeout_ms, now, expected is not None)
                transit = md.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1], now)
                return E.PRODUCER_FENCED if isinstance(transit, str) else transit
            case S.ONGOING:
                return None
            case _:
                raise AssertionError(f"{md.transactional_id} in state {md.state.name}")

    @staticmethod
    def _valid_expected(md: TransactionMetadata, producer_id: int, epoch: int) -> bool:
        return (md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id
                or (producer_id == md.previous_producer_id and is_epoch_exhausted(epoch)))

    # ------------------------------------------------------------ AddPartitionsToTxn, AddOffsetsToTxn

    async def handle_add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                                    partitions: Iterable[TopicPartition], client_version: int | None = None) -> ErrorCode:
        """`client_version` TV_2: the implicit add of a transactional Produce v12+ or TxnOffsetCommit v5
        (KIP-890 part 2), recorded as the transaction's client version."""
        partitions = set(partitions)
        await self._wait_completed(transactional_id)
        current = self._lookup(transactional_id)
        if isinstance(current, TransactionMetadata) and (
                current.pending or current.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
            # before the producer checks (KAFKA-18660): a TV2 producer whose epoch ran out already uses the
            # new producer id that only the Complete record makes the id's (Kafka: a pending transition)
            return E.CONCURRENT_TRANSACTIONS
        md = self._producer(transactional_id, producer_id, epoch)
        if isinstance(md, ErrorCode):
            return md
        if md.state == S.ONGOING and partitions <= md.partitions:
            return E.NONE
        return await self._append(md, md.prepare_add_partitions(partitions, self.clock.now_ms(), client_version))

    async def settled(self, transactional_id: str) -> None:
        """Returns once the id's marker work is done (or its bound passed): what a verification of a
        transactional produce or TxnOffsetCommit awaits before `verify_partitions`, as the adds do."""
        await self._wait_completed(transactional_id)

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ verify_only (handleVerifyPartitionsInTransaction): is each partition in
        the ongoing transaction? Nothing is written."""
        partitions = list(partitions)
        md = self._producer(transactional_id, producer_id, epoch)
        if not isinstance(md, ErrorCode) and md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            md = E.CONCURRENT_TRANSACTIONS
        if isinstance(md, ErrorCode):
            return dict.fromkeys(partitions, md)
        return {tp: E.NONE if tp in md.partitions else E.TRANSACTION_ABORTABLE for tp in partitions}

    # ------------------------------------------------------------ EndTxn

    async def handle_end_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                                     commit: bool) -> ErrorCode:
        """Transaction version 1's EndTxn (v0-4): the error only."""
        return (await self.end_transaction(transactional_id, producer_id, epoch, commit, TV_0))[0]

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                              client_version: int) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) as EndTxn v5 answers them (TransactionCoordinator.endTransaction).
        Under transaction version 1 the epoch must be the current one (the client never bumps it itself).
        Under version 2 the end bumps the epoch, so a retry carries the epoch before the bump: a retry is
        recognised by `epoch + 1 == current` (endTxnEpochBumped) once the transaction is prepared or
        complete, or, after the epoch ran out and the id was rotated, by the previous producer id at the
        last epoch (retryOnOverflow). A TV2 client may end a transaction nothing was added to (its adds are
        implicit, so it cannot know): on Empty/CompleteCommit/CompleteAbort at its current epoch an abort
        goes through PrepareAbort with no partitions, bumping the epoch, and a commit is INVALID_TXN_STATE
        (KAFKA-14563's table; a pending transition answers CONCURRENT_TRANSACTIONS before the epoch is
        checked, KAFKA-18464)."""
        none = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        await self._wait_completed(transactional_id)
        md = self._lookup(transactional_id)
        if md is None:
            return (E.INVALID_PRODUCER_ID_MAPPING, *none)
        if isinstance(md, ErrorCode):
            return (md, *none)
        v2_metadata = supports_epoch_bump(md.client_version)
        retry_on_overflow = (v2_metadata and md.previous_producer_id == producer_id
                             and epoch == MAX_EPOCH - 1 and md.producer_epoch == 0)
        retry_on_bump = v2_metadata and md.producer_epoch == epoch + 1
        if not v2_metadata:
            valid_epoch = epoch == md.producer_epoch
        elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        elif md.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow
        else:
            valid_epoch = epoch == md.producer_epoch
        if md.producer_id != producer_id and not retry_on_overflow:
            return (E.INVALID_PRODUCER_ID_MAPPING, *none)
        if md.pending:
            return (E.CONCURRENT_TRANSACTIONS, *none)
        done = (E.NONE, md.producer_id, md.producer_epoch)  # a retry of an end that completed
        if supports_epoch_bump(client_version) and md.state in COMPLETE:
            if retry_on_bump or retry_on_overflow:
                if md.state == S.EMPTY:
                    return (E.INVALID_TXN_STATE if commit else E.PRODUCER_FENCED, *none)
                return done if (md.state == S.COMPLETE_COMMIT) == commit else (E.INVALID_TXN_STATE, *none)
            if epoch != md.producer_epoch:
                return (E.PRODUCER_FENCED, *none)
            if commit:
                return (E.INVALID_TXN_STATE, *none)
            return await self._end(md, False, client_version)
        if not valid_epoch:
            return (E.PRODUCER_FENCED, *none)
        match md.state:
            case S.ONGOING:
                return await self._end(md, commit, client_version)
            case S.COMPLETE_COMMIT:
                return done if commit else (E.INVALID_TXN_STATE, *none)
            case S.COMPLETE_ABORT:
                return done if not commit else (E.INVALID_TXN_STATE, *none)
            case S.PREPARE_COMMIT:
                return (E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE, *none)
            case S.PREPARE_ABORT:
                return (E.CONCURRENT_TRANSACTIONS if not commit else E.INVALID_TXN_STATE, *none)
            case _:  # Empty
                return (E.INVALID_TXN_STATE, *none)

    async def _end(self, md: TransactionMetadata, commit: bool, client_version: int) -> tuple[ErrorCode, int, int]:
        """PrepareCommit/PrepareAbort for a client's EndTxn, with a new producer id when a TV2 end finds the
        epoch exhausted; the producer id and epoch the client goes on with."""
        next_producer_id = NO_PRODUCER_ID
        if supports_epoch_bump(client_version) and md.is_epoch_exhausted():
            allocated = self._allocate()
            if isinstance(allocated, ErrorCode):
                return allocated, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            next_producer_id = allocated
        error = await self._prepare_end(md, commit, None, client_version, next_producer_id)
        if error != E.NONE:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if md.next_producer_id != NO_PRODUCER_ID:
            # the epoch ran out: the client goes on with the new id, which the Complete record takes
            return E.NONE, md.next_producer_id, 0
        return E.NONE, md.producer_id, md.producer_epoch

    async def _prepare_end(self, md: TransactionMetadata, commit: bool, fenced_epoch: int | None,
                           client_version: int = TV_0, next_producer_id: int = NO_PRODUCER_ID) -> ErrorCode:
        state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        transit = md.prepare_abort_or_commit(state, self.clock.now_ms(), fenced_epoch, client_version, next_producer_id)
        error = await self._append(md, transit)
        if error == E.NONE:
            self._spawn(self._complete(md.transactional_id, md.producer_id, md.producer_epoch, commit,
                                       set(md.partitions), md.client_version), md.transactional_id)
        return error

    async def _abort_fenced(self, md: TransactionMetadata) -> ErrorCode:
        """The coordinator aborts an ongoing transaction itself (InitProducerId of a new producer, the
        timeout): the abort carries the epoch + 1, so the old producer is fenced everywhere."""
        # the coordinator's own abort runs at the cluster's transaction version (Kafka passes
        # transactionVersionLevel()); the fenced epoch is not bumped again (KAFKA-19367)
        return await self._prepare_end(md, False, md.fenced_epoch(), self.transaction_version())

    async def _complete(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                        partitions: set, transaction_version: int = TV_0) -> None:
        """Markers to every partition, then CompleteCommit/CompleteAbort (retried until written or the
        partition is gone: a load finishes what is left)."""
        coordinator_epoch = self.state.coordinator_epoch(self.state.partition_for(transactional_id))
        if coordinator_epoch is None:
            return  # the partition was unloaded meanwhile: its next coordinator completes the transaction
        while partitions:
            try:
                await self._write_markers(producer_id, epoch, commit, partitions, coordinator_epoch,
                                          transaction_version=transaction_version)
                break
            except CoordinatorFenced as exc:
                log.warning("giving up the markers of %s: %s", transactional_id, exc)
                return
            except Exception:  # never give up on markers: the transaction would stay prepared
                log.exception("writing the markers of %s failed; retrying", transactional_id)
                await self._sleep(RETRY_BACKOFF_S)
        while True:
            md = self.state.get_state(transactional_id)
            if not isinstance(md, TransactionMetadata) or md.producer_id != producer_id \
                    or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                return
            if not md.pending:
                error = await self._append(md, md.prepare_complete(self.clock.now_ms()), synced=False)
                if error == E.NONE:
                    log.debug("%s: %s", transactional_id, md.state.name)
                    return
            await self._sleep(RETRY_BACKOFF_S)

    # ------------------------------------------------------------ background: loads, timeouts

    def on_loaded(self, partition: int) -> None:
        """A loaded partition's transactions left in PrepareCommit/PrepareAbort: write their markers and
        complete them (Kafka's loadTransactionsForTxnTopicPartition -> addTxnMarkersToSend)."""
        for md in list(self.state.partitions.get(partition, {}).values()):
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                log.info("completing %s of %s after a load", md.state.name, md.transactional_id)
                self._spawn(self._complete(md.transactional_id, md.producer_id, md.producer_epoch,
                                           md.state == S.PREPARE_COMMIT, set(md.partitions), md.client_version),
                            md.transactional_id)

    def timed_out(self, now_ms: int) -> list[TransactionMetadata]:
        return [md for md in self.state.all()
                if md.state == S.ONGOING and not md.pending and md.start_ms + md.timeout_ms < now_ms]

    async def abort_timed_out_transactions(self) -> int:
        """Abort every transaction open past its timeout, fencing its producer (abortTimedOutTransactions)."""
        count = 0
        for md in self.timed_out(self.clock.now_ms()):
            log.info("aborting transaction %s (producer id %d epoch %d): open past its timeout of %d ms",
                     md.transactional_id, md.producer_id, md.producer_epoch, md.timeout_ms)
            if md.state == S.ONGOING and not md.pending and await self._abort_fenced(md) == E.NONE:
                count += 1
        return count

    async def remove_expired_transactional_ids(self) -> int:
        """Transactional ids with no transaction for transactional.id.expiration.ms are deleted: a tombstone
        in `__transaction_state`, the metadata gone once it is durable (Kafka's
        TransactionStateManager.removeExpiredTransactionalIds, through the Dead state)."""
        now = self.clock.now_ms()
        expired = [md for md in self.state.all() if md.state in COMPLETE and not md.pending
                   and md.last_update_ms + self.state.config.id_expiration_ms <= now]
        removed = 0
        for md in expired:
            if md.pending or md.state not in COMPLETE:
                continue  # taken up again meanwhile
            md.pending_state = S.DEAD
            partition = self.state.partition_for(md.transactional_id)
            key = encode_key(md.transactional_id)
            error = await self._append_record(partition, key, None)
            if error == E.NONE:
                self.state.replay(partition, key, None)
                removed += 1
                log.info("removed the expired transactional id %s", md.transactional_id)
            else:
                md.pending_state = None
        return removed

    def describe(self, transactional_id: str) -> ErrorCode | TransactionMetadata:
        md = self._lookup(transactional_id)
        if md is None or (isinstance(md, TransactionMetadata) and md.state == S.DEAD):
            return E.TRANSACTIONAL_ID_NOT_FOUND
        return md

