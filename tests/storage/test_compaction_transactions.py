"""Compaction of transactional batches, as Kafka's LogCleaner: an aborted transaction's records are
removed and never hide an older value; a committed one's count from its marker; one without a marker in
the cleaned segments stays whole and hides nothing; markers stay."""
from kcoord.coordinator.testing import ManualClock
from kcoord.protocol.control_records import end_txn_marker_batch
from kcoord.protocol.records import build_batch
from kcoord.storage import LogConfig, PartitionLog
from tests.storage.test_compaction import records


def open_log(tmp_path):
    return PartitionLog(str(tmp_path / "t-0"), "t", 0, LogConfig(cleanup_policy="compact", segment_bytes=300),
                        clock=ManualClock().now_ms)


def txn(log, pid: int, key: bytes, value: bytes) -> int:
    return log.append(build_batch([(key, value, (), 1000)], producer_id=pid, producer_epoch=0, base_sequence=0,
                                  transactional=True)).base_offset


def test_aborted_records_go_and_never_hide_the_committed_value(tmp_path):
    log = open_log(tmp_path)
    plain = log.append(build_batch([(b"k", b"committed", (), 1000)])).base_offset
    aborted = txn(log, 7, b"k", b"aborted")
    log.append(end_txn_marker_batch(7, 0, commit=False))
    committed_txn = txn(log, 8, b"j", b"txn-committed")
    log.append(build_batch([(b"j", b"older-plain", (), 1000)]))  # before the marker: the commit wins
    log.append(end_txn_marker_batch(8, 0, commit=True))
    open_txn = txn(log, 9, b"k", b"undecided")
    log.roll()
    log.flush()
    log.compact(now_ms=0)
    kept = {(offset, key, value) for offset, key, value in records(log) if key in (b"k", b"j")}
    assert (plain, b"k", b"committed") in kept
    assert (aborted, b"k", b"aborted") not in kept
    assert (committed_txn, b"j", b"txn-committed") in kept
    assert (open_txn, b"k", b"undecided") in kept
    assert not any(value == b"older-plain" for _o, _k, value in kept)


def test_a_tombstone_inside_an_open_transaction_wins(tmp_path):
    """A delete between a transaction's record and its COMMIT drops that key from it (the group
    coordinator's replay of the tombstone drops the pending offset): compaction keeps the tombstone."""
    log = open_log(tmp_path)
    txn(log, 5, b"k", b"pending")
    tombstone = log.append(build_batch([(b"k", None, (), 1000)])).base_offset
    log.append(end_txn_marker_batch(5, 0, commit=True))
    log.roll()
    log.flush()
    log.compact(now_ms=0)
    assert [(offset, value) for offset, key, value in records(log) if key == b"k"] == [(tombstone, None)]
