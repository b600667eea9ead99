"""Small JSON documents kept in log.dirs (topics, dynamic and group configs, SCRAM credentials, ACLs), replaced
atomically through storage's file layer (kcoord.storage.fs.replace_file): a crash leaves the old or the new file."""
from __future__ import annotations

import json
import os
from typing import Any

from kcoord.storage.fs import FS, replace_file

_FS = FS()


def read_json(path: str, default: Any) -> Any:
    """The document at `path`, or `default` if there is none."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return default


def write_json_atomically(path: str, data: Any) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    replace_file(_FS, path, json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))
