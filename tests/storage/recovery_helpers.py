"""Helpers of the clean-shutdown and recovery-point tests (imported by name: tests/ has no packages)."""
import errno
import os
import shutil

from kcoord.protocol.records import build_batch, decode_records, iter_batches
from kcoord.storage import FS, LogConfig, LogManager, PartitionLog
from kcoord.storage.segment import SegmentFiles
from tests.storage.storage_helpers import segment_facts

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=60)
ONE_SEGMENT = CONFIG.replace(segment_bytes=5000)  # rolled by hand
KEEP = CONFIG.replace(retention_ms=-1)  # maintenance passes must not delete the test's old segments


def put(log: PartitionLog, i: int, ts: int | None = None) -> int:
    value = b"value-%d-" % i + b"x" * (i % 37)
    return log.append(build_batch([(b"k%d" % (i % 7), value, (), 1_000 + i if ts is None else ts)])).base_offset


def everything(log: PartitionLog) -> list[tuple[int, bytes, bytes, int]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        for _, header, batch in iter_batches(log.read(offset, 1 << 20), verify=True):
            out += [(r.offset, r.key, r.value, r.timestamp) for r in decode_records(batch)]
            offset = header.next_offset
    return out


def facts(log: PartitionLog) -> list[tuple]:
    return [segment_facts(s) + (s.index.bytes_since_last_entry,) for s in log.segments]


def crash(mgr: LogManager) -> None:
    """Leave as a SIGKILL would: descriptors dropped, nothing flushed, sealed or checkpointed."""
    for partition_log in mgr.logs():
        for s in partition_log.segments:
            SegmentFiles(partition_log.fs, [s.fd, s.index_fd, s.timeindex_fd]).close()
    mgr.fsync_executor.shutdown(wait=True)
    mgr.cleaner_executor.shutdown(wait=True)


def fully_recovered(path: str, config: LogConfig = CONFIG) -> PartitionLog:
    """The same partition recovered from scratch, from a copy (every segment CRC-checked)."""
    copy = path + "-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(path, copy)
    log = PartitionLog(os.path.join(copy, "t-0"), "t", 0, config)
    assert log.loaded_recovered == len(log.segments) and log.loaded_trusted == 0
    return log


async def write_and_close(path: str, n: int, config: LogConfig = CONFIG) -> None:
    mgr = LogManager(path, config)
    log = mgr.get_or_create("t", 0)
    for i in range(n):
        put(log, i)
    await mgr.close()


class FailingFsyncOf(FS):
    def __init__(self) -> None:
        self.failing: set[int] = set()
        self.failing_dirs = False

    def fsync(self, fd: int) -> None:
        if fd in self.failing:
            raise OSError(errno.EIO, "injected: fsync failed")
        super().fsync(fd)

    def fsync_dir(self, path: str) -> None:
        if self.failing_dirs:
            raise OSError(errno.EIO, "injected: directory fsync failed")
        super().fsync_dir(path)


class RecordingFS(FS):
    def __init__(self) -> None:
        self.synced: set[str] = set()

    def fsync(self, fd: int) -> None:
        self.synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        super().fsync(fd)
