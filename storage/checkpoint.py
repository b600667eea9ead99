"""Kafka's checkpoint files: a version line (0), a count line, then one entry per line. Offset checkpoints
(`cleaner-offset-checkpoint`, `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` in
log.dirs) hold "topic partition offset"
entries; a partition's `leader-epoch-checkpoint` holds "epoch start_offset" entries
(kcoord.storage.leader_epochs). Written to a temporary file, fsynced and renamed over the old one, so a crash
leaves either the old or the new checkpoint.
"""
from __future__ import annotations

import logging

from kcoord.storage.fs import FS, read_file, replace_file

log = logging.getLogger("kcoord.storage")

VERSION = 0


def write_checkpoint_lines(fs: FS, path: str, entries: list[str], durable: bool = True) -> None:
    """`durable=False` leaves out the fsyncs (the leader epoch checkpoint on the append path, as Kafka
    since KAFKA-15046): a crash may then leave the old file, or a torn new one that reads as malformed."""
    replace_file(fs, path, ("\n".join([str(VERSION), str(len(entries)), *entries]) + "\n").encode(), durable)


def read_checkpoint_lines(fs: FS, path: str) -> list[str] | None:
    """The entries; None for a missing or (with a warning) malformed file."""
    data = read_file(fs, path)
    if data is None:
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    try:
        if int(lines[0]) != VERSION:
            raise ValueError(f"version {lines[0]}")
        count = int(lines[1])
        entries = lines[2:2 + count]
        if len(entries) != count:
            raise ValueError(f"{len(entries)} entries, expected {count}")
        return entries
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return None


def write_checkpoint(fs: FS, path: str, offsets: dict[tuple[str, int], int]) -> None:
    write_checkpoint_lines(fs, path, [f"{topic} {partition} {offset}"
                                      for (topic, partition), offset in sorted(offsets.items())])


def read_checkpoint(fs: FS, path: str) -> dict[tuple[str, int], int]:
    """The checkpointed offsets; {} (with a warning) for a missing or malformed file."""
    out = {}
    for line in read_checkpoint_lines(fs, path) or []:
        try:
            topic, partition, offset = line.rsplit(" ", 2)
            out[(topic, int(partition))] = int(offset)
        except ValueError:
            log.warning("ignoring malformed checkpoint %s: bad entry %r", path, line)
            return {}
    return out
