"""Kafka's offset checkpoint files (here: `cleaner-offset-checkpoint`, `recovery-point-offset-checkpoint`):
a version line (0), a count line, then one "topic partition offset" line per partition. Written to a
temporary file, fsynced and renamed over the old one, so a crash leaves either the old or the new
checkpoint.
"""
from __future__ import annotations

import logging

from storage.fs import FS, read_file, replace_file

log = logging.getLogger("kcoord.storage")

VERSION = 0


def write_checkpoint(fs: FS, path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    replace_file(fs, path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(fs: FS, path: str) -> dict[tuple[str, int], int]:
    """The checkpointed offsets; {} (with a warning) for a missing or malformed file."""
    data = read_file(fs, path)
    if data is None:
        return {}
    text = data.decode("utf-8", "replace")
    try:
        lines = text.splitlines()
        if int(lines[0]) != VERSION:
            raise ValueError(f"version {lines[0]}")
        count = int(lines[1])
        out = {}
        for line in lines[2:2 + count]:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        if len(out) != count:
            raise ValueError(f"{len(out)} entries, expected {count}")
        return out
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}
