"""The file-system layer the log does all its I/O through, and a fault-injecting one for tests.

Files are raw descriptors with positional reads and writes (the log knows where every byte goes,
so no shared file offset is involved). FaultyFS fails the next write or fsync, or writes short,
so the error paths are tested without a failing disk.
"""
from __future__ import annotations

import errno
import os
import threading


class FS:
    """Plain OS file system."""

    def open(self, path: str) -> int:
        return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)

    def pwrite(self, fd: int, data, position: int) -> int:
        return os.pwrite(fd, data, position)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        return os.pread(fd, size, position)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def close(self, fd: int) -> None:
        os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def fsync_dir(self, path: str) -> None:
        # A new or renamed file is durable only once its directory entry is.
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def write_all(self, fd: int, data, position: int) -> None:
        """Write every byte (a regular file may legitimately take fewer per call)."""
        view = memoryview(data)
        while view:
            written = self.pwrite(fd, view, position)
            if written <= 0:
                raise OSError(errno.EIO, "write made no progress")
            view = view[written:]
            position += written


class FaultyFS(FS):
    """FS that fails on request. Faults are one-shot and thread-safe (fsyncs run in worker threads).

    fail_next_write(exc): the next pwrite raises exc (default ENOSPC) without writing.
    short_next_write(n, then_fail): the next pwrite writes only n bytes; with then_fail the one after
        raises, the torn-write case; without, the caller must finish the write itself.
    fail_next_fsync(exc): the next fsync raises exc (default EIO).
    fsync_gate: a threading.Event that, when set to a cleared Event, holds every fsync until set —
        lets a test pile up committers behind one running fsync.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._write_fault: OSError | None = None
        self._short: int | None = None
        self._fail_after_short = False
        self._fsync_fault: OSError | None = None
        self.fsync_gate: threading.Event | None = None
        self.fsyncs = 0
        self.writes = 0

    def fail_next_write(self, exc: OSError | None = None) -> None:
        with self._lock:
            self._write_fault = exc or OSError(errno.ENOSPC, "injected: no space left on device")

    def short_next_write(self, nbytes: int, then_fail: bool = True) -> None:
        with self._lock:
            self._short = nbytes
            self._fail_after_short = then_fail

    def fail_next_fsync(self, exc: OSError | None = None) -> None:
        with self._lock:
            self._fsync_fault = exc or OSError(errno.EIO, "injected: fsync failed")

    def pwrite(self, fd: int, data, position: int) -> int:
        with self._lock:
            self.writes += 1
            fault, self._write_fault = self._write_fault, None
            short, self._short = self._short, None
            if short is not None and self._fail_after_short:
                self._write_fault = OSError(errno.ENOSPC, "injected: disk full after a short write")
        if fault is not None:
            raise fault
        if short is not None:
            return super().pwrite(fd, memoryview(data)[:short], position)
        return super().pwrite(fd, data, position)

    def fsync(self, fd: int) -> None:
        gate = self.fsync_gate
        if gate is not None:
            gate.wait()
        with self._lock:
            self.fsyncs += 1
            fault, self._fsync_fault = self._fsync_fault, None
        if fault is not None:
            raise fault
        super().fsync(fd)


def replace_file(fs: FS, path: str, data, durable: bool = True) -> None:
    """Make `data` the content of `path` atomically: a temporary file written and fsynced, renamed over
    `path`, and the directory fsynced, so a crash leaves the old file or the new one, never a torn one.
    `durable=False` leaves out the fsyncs: a crash may then leave the old file or a torn new one."""
    tmp = path + ".tmp"
    fd = fs.open(tmp)
    try:
        fs.truncate(fd, 0)
        fs.write_all(fd, data, 0)
        if durable:
            fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, path)
    if durable:
        fs.fsync_dir(os.path.dirname(path) or ".")


def read_file(fs: FS, path: str) -> bytes | None:
    """The whole content of `path`, or None if there is no such file."""
    if not fs.exists(path):
        return None
    fd = fs.open(path)
    try:
        return fs.pread(fd, fs.size(fd), 0)
    finally:
        fs.close(fd)
