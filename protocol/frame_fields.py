"""Field readers shared by the whole-frame fast paths (heartbeat_frames, offset_commit_frames).

They read the common shapes only and raise `Unusual` for anything else (a long compact string, a
string past the end, a negative length other than null), which the fast paths turn into "not
taken": the frame then goes to the general codec, which decodes it or says what is wrong with it.
"""
from __future__ import annotations

import struct

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
REQUEST_HEADER_START = 14  # size, api_key, api_version, correlation_id, client_id's int16 length


class Unusual(Exception):
    """A shape the fast path leaves to the general codec."""


def string(frame: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = _INT16.unpack_from(frame, pos)
    if n < 0:
        if n != -1:
            raise Unusual
        return None, pos + 2
    if pos + 2 + n > len(frame):
        raise Unusual
    return frame[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def compact_string(frame: bytes, pos: int) -> tuple[str | None, int]:
    n = frame[pos] - 1  # compact: length + 1 (0: null); a single byte holds lengths up to 126
    if n < 0:
        return None, pos + 1
    if n >= 127 or pos + 1 + n > len(frame):
        raise Unusual
    return frame[pos + 1:pos + 1 + n].decode(), pos + 1 + n


def skip_request_header(frame: bytes, client_id_length: int, flexible: bool) -> int:
    """Where the body starts: past client_id (unused by the fast paths, but it must be UTF-8) and, in
    header v2, the header's tag section (which must be empty)."""
    pos = REQUEST_HEADER_START
    if client_id_length > 0:
        frame[pos:pos + client_id_length].decode()
        pos += client_id_length
    if flexible:
        if frame[pos]:
            raise Unusual
        pos += 1
    return pos


def group_member(frame: bytes, pos: int, read) -> tuple[str | None, int, str | None, int]:
    """(group_id, generation_id, member_id, position after them): how Heartbeat and OffsetCommit
    bodies begin; `read` is `string` or `compact_string`."""
    group_id, pos = read(frame, pos)
    (generation_id,) = _INT32.unpack_from(frame, pos)
    member_id, pos = read(frame, pos + 4)
    return group_id, generation_id, member_id, pos
