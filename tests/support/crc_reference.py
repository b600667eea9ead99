"""crcmod's crc-32c as the independent reference for CRC-32C (the project's fast path is google-crc32c,
see the README): a check of every record batch in a data directory, which the server fixtures run on
each server's data after it stops, so every batch the suite writes through a real server is checked."""
from __future__ import annotations

import os
import pathlib

import crcmod.predefined

from kcoord.protocol.records import ATTRIBUTES_OFFSET
from kcoord.storage.manager import parse_partition_dir
from kcoord.storage.reader import iter_partition_batches

crc32c_reference = crcmod.predefined.mkCrcFun("crc-32c")


def batch_crc_mismatches(data_dir: str | os.PathLike) -> list[str]:
    """'<partition>@<offset>: stored X, crcmod Y' for every batch whose stored CRC is not crcmod's CRC-32C
    of its bytes from the attributes on (DefaultRecordBatch's checksum); [] when all agree."""
    problems = []
    root = pathlib.Path(data_dir)
    if not root.is_dir():
        return problems
    for part in sorted(root.iterdir()):
        if not part.is_dir() or parse_partition_dir(part.name) is None:
            continue
        for header, batch in iter_partition_batches(str(part), verify=False):
            expected = crc32c_reference(bytes(batch[ATTRIBUTES_OFFSET:]))
            if header.crc != expected:
                problems.append(f"{part.name}@{header.base_offset}: stored {header.crc:#010x}, crcmod {expected:#010x}")
    return problems
