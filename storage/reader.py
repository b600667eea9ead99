"""Read-only access to a partition directory's segment files, for tools and analytics.

Never writes, so it is safe next to a live broker: no recovery, no index rebuild. The newest
segment may be mid-append, so a torn or not-yet-complete batch at the end of the last segment
ends the iteration quietly; a bad batch anywhere else raises DecodeError.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

from kcoord.protocol.errors import DecodeError
from kcoord.protocol.records import BatchHeader, batch_crc
from kcoord.storage.segment import LOG_SUFFIX, SCAN_CHUNK, scan_batches


def list_segments(partition_dir: str) -> list[tuple[int, str]]:
    """(base offset, path) of every `.log` segment, oldest first."""
    out = []
    for name in os.listdir(partition_dir):
        stem = name[:-len(LOG_SUFFIX)]
        if name.endswith(LOG_SUFFIX) and stem.isdigit():
            out.append((int(stem), os.path.join(partition_dir, name)))
    return sorted(out)


def iter_segment_batches(path: str, verify: bool = True, last_segment: bool = True,
                         chunk_size: int = SCAN_CHUNK) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """(file position, header, batch view) for each batch of one segment file.

    With verify, CRCs are checked. A bad batch raises DecodeError, except in the last segment,
    whose tail may be mid-append or not yet recovered after a crash (the iteration ends there).
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        try:
            for position, header, batch in scan_batches(lambda n, at: os.pread(fd, n, at), 0, size, chunk_size):
                if verify and batch_crc(batch) != header.crc:
                    raise DecodeError(f"CRC mismatch in {path}", offset=position)
                yield position, header, batch
        except DecodeError:
            if not last_segment:
                raise
    finally:
        os.close(fd)


def iter_partition_batches(partition_dir: str, start_offset: int = 0,
                           verify: bool = True) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every batch of the partition holding offsets >= start_offset, in offset order."""
    segments = list_segments(partition_dir)
    for i, (_, path) in enumerate(segments):
        following = segments[i + 1][0] if i + 1 < len(segments) else None
        if following is not None and following <= start_offset:
            continue
        for _, header, batch in iter_segment_batches(path, verify, last_segment=following is None):
            if header.last_offset >= start_offset:
                yield header, batch
