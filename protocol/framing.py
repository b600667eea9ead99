"""Split a TCP byte stream into Kafka frames (4-byte big-endian size, then that many bytes).

FrameSplitter is pure (no I/O): the connection feeds it what the socket delivered and gets back the
complete frame payloads. Each payload byte is copied at most once:
- a frame wholly inside one fed chunk comes back as a zero-copy memoryview of that chunk;
- a frame spread over several chunks is kept as views of those chunks until complete, then joined
  once. Nothing is allocated up front from the size prefix, so a client that announces a large
  frame and sends nothing costs only what it actually sent.
Chunks should be `bytes` (what asyncio's Protocol.data_received passes); a mutable buffer is copied
into bytes first, since views of it would change under us.
"""
from __future__ import annotations

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.primitives import INT32

# Kafka's socket.request.max.bytes default (100 MiB).
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


class FrameTooLarge(DecodeError):
    """A size prefix above the configured maximum (Kafka closes the connection)."""


class FrameSplitter:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._pending: list[memoryview] = []  # a partial frame (or partial size prefix), in order
        self.buffered = 0                     # bytes held for an incomplete frame
        self._want = -1                       # payload size of the partial frame; -1: size unknown
        self._offset = 0                      # stream offset, for error messages

    def skip(self, size: int) -> None:
        """Account for a whole frame of `size` bytes (after the prefix) that the caller took from the
        stream itself, which it may only do while nothing is `buffered`."""
        self._offset += 4 + size

    def feed(self, data) -> list[memoryview]:
        """Add bytes from the stream; return every frame payload completed by them (possibly none)."""
        if not isinstance(data, bytes):
            data = bytes(data)
        view = memoryview(data)
        frames: list[memoryview] = []
        pos = 0
        n = len(view)
        if self._pending:
            pos = self._continue(view, frames)
        while pos < n:
            if n - pos < 4:
                self._hold(view[pos:])
                break
            (size,) = INT32.unpack_from(view, pos)
            self._check_size(size, self._offset + pos)
            if n - pos - 4 >= size:
                frames.append(view[pos + 4:pos + 4 + size])
                pos += 4 + size
            else:
                self._want = size
                self._hold(view[pos + 4:])
                pos = n
        self._offset += n
        return frames

    def _hold(self, part: memoryview) -> None:
        self._pending.append(part)
        self.buffered += len(part)

    def _check_size(self, size: int, offset: int) -> None:
        if size < 0:
            raise DecodeError(f"invalid frame size {size}", api="frame", offset=offset)
        if size > self.max_frame_bytes:
            raise FrameTooLarge(f"frame of {size} bytes exceeds max {self.max_frame_bytes} "
                                f"(socket.request.max.bytes)", api="frame", offset=offset)

    def _continue(self, view: memoryview, frames: list[memoryview]) -> int:
        """Complete the pending size prefix and/or frame from the start of `view`; returns bytes used."""
        pos = 0
        if self._want < 0:                    # still collecting the 4-byte size prefix
            need = 4 - self.buffered
            if len(view) < need:
                self._hold(view)
                return len(view)
            prefix = b"".join(self._pending) + view[:need]
            pos = need
            (size,) = INT32.unpack_from(prefix)
            self._check_size(size, self._offset - self.buffered)
            self._pending.clear()
            self.buffered = 0
            self._want = size
        need = self._want - self.buffered
        if len(view) - pos < need:
            self._hold(view[pos:])
            return len(view)
        if self._pending:
            self._pending.append(view[pos:pos + need])
            frames.append(memoryview(b"".join(self._pending)))   # the one copy of this frame
        else:
            frames.append(view[pos:pos + need])
        self._pending.clear()
        self.buffered = 0
        self._want = -1
        return pos + need
