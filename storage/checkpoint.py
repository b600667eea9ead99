"""Kafka's offset checkpoint files (here: `cleaner-offset-checkpoint`): a version line (0), a count
line, then one "topic partition offset" line per partition. Written to a temporary file, fsynced
and renamed over the old one, so a crash leaves either the old or the new checkpoint.
"""
from __future__ import annotations

import logging
import os

from storage.fs import FS

log = logging.getLogger("kcoord.storage")

VERSION = 0


def write_checkpoint(fs: FS, path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    data = ("\n".join(lines) + "\n").encode()
    tmp = path + ".tmp"
    fd = fs.open(tmp)
    try:
        fs.truncate(fd, 0)
        fs.write_all(fd, data, 0)
        fs.fsync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, path)
    fs.fsync_dir(os.path.dirname(path) or ".")


def read_checkpoint(fs: FS, path: str) -> dict[tuple[str, int], int]:
    """The checkpointed offsets; {} (with a warning) for a missing or malformed file."""
    if not fs.exists(path):
        return {}
    fd = fs.open(path)
    try:
        text = fs.pread(fd, fs.size(fd), 0).decode("utf-8", "replace")
    finally:
        fs.close(fd)
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
