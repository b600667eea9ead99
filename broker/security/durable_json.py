"""A small JSON document kept durably under log.dirs (SCRAM credentials, ACLs): written to a temporary
file, fsynced, renamed over the old one, and the directory fsynced, so a crash leaves the old or the new
document, never half of one."""
from __future__ import annotations

import json
import os
from typing import Any


def read(path: str, default: Any) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return default


def write(path: str, document: Any) -> None:
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(document, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
