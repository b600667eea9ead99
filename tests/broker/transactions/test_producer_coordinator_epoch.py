"""A partition's producer state keeps the coordinator epoch of each producer's last marker (Kafka's
ProducerStateEntry.coordinatorEpoch, storage/src/main/java/org/apache/kafka/storage/internals/log/
ProducerStateManager.java and ProducerAppendInfo.appendEndTxnMarker), and rebuilds it from the markers in
the log: what a new leader, which kept no producer state as a follower, checks markers against."""
from __future__ import annotations

from kcoord.broker.data.producers import ProducerStateManager
from kcoord.protocol.control_records import end_txn_marker_batch
from kcoord.storage import LogManager

TP = ("out", 0)


def test_coordinator_epochs_are_rebuilt_from_the_markers_in_the_log(tmp_path):
    logs = LogManager(str(tmp_path))
    plog = logs.get_or_create(*TP)
    for producer_id, epoch, coordinator_epoch in [(7, 0, 2), (7, 0, 5), (8, 3, 1), (7, 1, 4)]:
        plog.append(bytearray(end_txn_marker_batch(producer_id, epoch, False, coordinator_epoch)))
    rebuilt = ProducerStateManager(str(tmp_path), logs)
    assert rebuilt.coordinator_epoch_of(TP, plog, 7) == 5  # the highest seen, kept across the epoch bump
    assert rebuilt.epoch_of(TP, plog, 7) == 1
    assert rebuilt.coordinator_epoch_of(TP, plog, 8) == 1
    assert rebuilt.coordinator_epoch_of(TP, plog, 9) == -1  # no marker: nothing to refuse against
    rebuilt.on_marker(TP, plog, 8, 3, 6)
    assert rebuilt.coordinator_epoch_of(TP, plog, 8) == 6


def test_a_marker_after_a_verification_started_ends_what_was_verified(tmp_path):
    """The VerificationGuard kcoord keeps for a verification asked of another node (UnifiedLog.
    maybeStartTransactionVerification / the marker clearing it): a marker of the producer at or after the
    log end seen when the verification started means the verified transaction is over; markers of other
    producers, or earlier ones, do not. Rebuilt from the log like the rest of the index."""
    from kcoord.broker.data.txn_index import TxnIndex

    logs = LogManager(str(tmp_path))
    plog = logs.get_or_create(*TP)
    plog.append(bytearray(end_txn_marker_batch(7, 0, True, 0)))  # offset 0
    started_at = plog.log_end_offset
    index = TxnIndex()
    assert not index.state(plog).ended_since(7, started_at)
    info = plog.append(bytearray(end_txn_marker_batch(8, 0, False, 0)))
    index.state(plog).end(8, False, info.base_offset)
    assert not index.state(plog).ended_since(7, started_at)
    info = plog.append(bytearray(end_txn_marker_batch(7, 0, False, 0)))
    index.state(plog).end(7, False, info.base_offset)
    assert index.state(plog).ended_since(7, started_at)
    assert TxnIndex().state(plog).ended_since(7, started_at)  # a new leader's scan sees it too
