"""Deferred appends (the coordinator's): offsets assigned at once, bytes written by the next fsync
round's worker. Until then reads do not see them; afterwards the files are exactly what direct
appends write. Failures under load are covered by DeferredFailureMachine (test_group_commit)."""
import os

import pytest
from storage_helpers import batch

from protocol.records import decode_records, iter_batches
from storage import LogConfig, PartitionLog

pytestmark = pytest.mark.timeout(30)

CONFIG = {"segment_bytes": 900, "index_interval_bytes": 100}  # several segments, many index entries


def open_log(path, **config):
    return PartitionLog(str(path), "t", 0, LogConfig(**{**CONFIG, **config}))


def offsets_in(data: bytes) -> list[int]:
    return [rec.offset for _, _, b in iter_batches(data) for rec in decode_records(b)]


def values(log) -> list[bytes]:
    return [r.value for _, b in log.batches() for r in decode_records(b)]


def files(directory) -> dict[str, bytes]:
    return {name: open(os.path.join(directory, name), "rb").read() for name in sorted(os.listdir(directory))}


def payloads(n):
    return [batch(1 + i % 3, value=b"v%03d" % i, ts=1_000 + i) for i in range(n)]


async def test_reads_see_deferred_appends_once_their_round_wrote_them(tmp_path):
    log = open_log(tmp_path / "d")
    log.append(batch(2, value=b"direct"))
    info = log.append(batch(3, value=b"later"), deferred=True)
    assert (info.base_offset, info.last_offset, log.log_end_offset) == (2, 4, 5)
    # Offsets are taken, the bytes are not on disk yet: reads stop before them.
    assert offsets_in(log.read(0, 1 << 20)) == [0, 1]
    assert log.read(2, 1 << 20) == b""
    assert len(values(log)) == 2
    await log.sync(info)
    assert log.recovery_point == 5
    assert offsets_in(log.read(0, 1 << 20)) == list(range(5))
    assert offsets_in(log.read(0, 1 << 20, max_offset=2)) == [0, 1]
    log.close()


async def test_deferred_appends_write_the_same_files_as_direct_ones(tmp_path):
    direct, deferred = open_log(tmp_path / "a"), open_log(tmp_path / "b")
    infos = []
    for i, data in enumerate(payloads(40)):
        assert direct.append(data) == (info := deferred.append(data, deferred=True))
        infos.append(info)
        if i % 7 == 6:
            await deferred.sync(info)  # some rounds cover one append, some several, across rolls
    await deferred.sync(infos[-1])
    assert len(deferred.segments) > 2
    assert values(deferred) == values(direct)
    direct.close()
    deferred.close()
    assert files(tmp_path / "b") == files(tmp_path / "a")  # .log, .index and .timeindex alike


def test_close_writes_what_no_round_wrote(tmp_path):
    log = open_log(tmp_path / "d")
    for data in payloads(10):
        log.append(data, deferred=True)
    expected = log.log_end_offset
    log.close()
    reopened = open_log(tmp_path / "d")
    assert reopened.log_end_offset == expected
    assert values(reopened) == _all_values(payloads(10))
    reopened.close()


def test_a_direct_append_writes_the_deferred_ones_before_it(tmp_path):
    log = open_log(tmp_path / "d")
    log.append(batch(1, value=b"first"), deferred=True)
    log.append(batch(1, value=b"second"))
    assert values(log) == [b"first-0", b"second-0"]
    log.close()


def test_truncate_to_inside_deferred_appends_keeps_those_before(tmp_path):
    log = open_log(tmp_path / "d")
    for data in payloads(12):
        log.append(data, deferred=True)
    cut = log.log_end_offset - 5
    kept = _all_values(payloads(12))[:cut]
    log.truncate_to(cut)
    assert log.log_end_offset <= cut
    assert values(log) == kept[:log.log_end_offset]
    log.append(batch(1, value=b"after"))
    assert values(log)[-1] == b"after-0"
    log.close()


def _all_values(batches):
    return [r.value for data in batches for _, _, b in iter_batches(data) for r in decode_records(b)]
