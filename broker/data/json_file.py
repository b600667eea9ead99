"""Small JSON metadata files in log.dirs (topics, dynamic configs), replaced atomically: write a temporary
file, fsync it, rename it over the old one, fsync the directory. A crash leaves the old or the new file."""
from __future__ import annotations

import json
import os
from typing import Any


def read_json(path: str, default: Any) -> Any:
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_json_atomically(path: str, data: Any) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
