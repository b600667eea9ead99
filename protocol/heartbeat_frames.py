"""Whole Heartbeat frames, read and written by hand: the broker's hottest request.

Every member of every group sends one every heartbeat.interval.ms, so a busy coordinator serves
far more Heartbeats than anything else. These functions go from the request frame straight to its
fields, and from an error code straight to the response frame, without the header and message
objects of the general codec (protocol/headers.py + protocol/messages.py), which stays the
reference: a test shows both agree on every case.

`read_request` only takes the common shape: short strings (compact lengths of one byte), no
tagged fields, valid UTF-8. For anything else it returns None, and the caller hands the frame to
the general codec, which decodes it or says exactly what is wrong with it.
"""
from __future__ import annotations

import struct

from protocol.frame_fields import Unusual, compact_string, group_member, skip_request_header, string

API_KEY = 12
MAX_VERSION = 4
FIRST_FLEXIBLE_VERSION = 4  # header v2 and compact strings; read_request knows no later version

# size int32 (of what follows), api_key int16, api_version int16, correlation_id int32; then
# client_id, whose length is an int16 in request header v1 and v2 alike
_REQUEST_HEAD_FIXED = struct.Struct(">ihhi")
_INT16 = struct.Struct(">h")

# Response frames: size int32 (of what follows), correlation_id int32, then
_RESPONSE_V0 = struct.Struct(">iih")     # error_code int16
_RESPONSE_V1 = struct.Struct(">iiih")    # throttle_time_ms int32, error_code int16 (v1-v3)
_RESPONSE_V4 = struct.Struct(">iiBihB")  # header tag section, throttle_time_ms, error_code, body tag section


# (api_version, group_id, generation_id, member_id, group_instance_id)
Fields = tuple[int, str, int, str, "str | None"]

# A member sends the same bytes every time but for the correlation id, so what follows that id
# (client_id and body) is remembered with the fields it parsed to. Bounded: emptied when full.
MAX_REMEMBERED = 1 << 16
_remembered: dict[bytes, Fields] = {}


def read_request(frame: bytes) -> tuple[int, Fields] | None:
    """A whole Heartbeat request frame (size prefix included) -> (correlation_id, fields), or None
    when it is not a Heartbeat this reader takes (see the module docstring)."""
    if len(frame) < 14:
        return None
    size, key, version, correlation_id = _REQUEST_HEAD_FIXED.unpack_from(frame, 0)
    if key != API_KEY or size != len(frame) - 4:
        return None
    rest = frame[12:]
    fields = _remembered.get(rest)
    if fields is None or fields[0] != version:
        fields = _parse(frame, version)
        if fields is None:
            return None
        if len(_remembered) >= MAX_REMEMBERED:
            _remembered.clear()
        _remembered[rest] = fields
    return correlation_id, fields


def _parse(frame: bytes, version: int) -> Fields | None:
    if not 0 <= version <= MAX_VERSION:
        return None
    flexible = version >= FIRST_FLEXIBLE_VERSION
    read = compact_string if flexible else string
    try:
        (n,) = _INT16.unpack_from(frame, 12)
        pos = skip_request_header(frame, n, flexible)
        group_id, generation_id, member_id, pos = group_member(frame, pos, read)
        group_instance_id = None
        if version >= 3:
            group_instance_id, pos = read(frame, pos)
        if flexible and frame[pos]:  # the body's tagged fields (or a string that ran past the end)
            return None
    except (Unusual, struct.error, UnicodeDecodeError, IndexError):
        return None
    if group_id is None or member_id is None or pos > len(frame):  # null, or past the end: general path
        return None
    return version, group_id, generation_id, member_id, group_instance_id


def response_frame(version: int, correlation_id: int, error_code: int) -> bytes:
    """The whole HeartbeatResponse frame (size prefix included), throttle_time_ms 0."""
    if version >= FIRST_FLEXIBLE_VERSION:
        return _pack_v4(_SIZE_V4, correlation_id, 0, 0, error_code, 0)
    if version >= 1:
        return _pack_v1(_SIZE_V1, correlation_id, 0, error_code)
    return _pack_v0(_SIZE_V0, correlation_id, error_code)


_pack_v0, _pack_v1, _pack_v4 = _RESPONSE_V0.pack, _RESPONSE_V1.pack, _RESPONSE_V4.pack
# the size prefix counts what follows it
_SIZE_V0, _SIZE_V1, _SIZE_V4 = _RESPONSE_V0.size - 4, _RESPONSE_V1.size - 4, _RESPONSE_V4.size - 4
