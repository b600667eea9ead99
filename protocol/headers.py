"""Request and response headers (Kafka's RequestHeader.json / ResponseHeader.json).

Request header v1: api_key int16, api_version int16, correlation_id int32, client_id nullable string.
Request header v2 (flexible request versions) adds a tagged-field section. Its client_id stays a
*non-compact* string ("flexibleVersions": "none" on that field) so a broker can always read it.
Response header v0: correlation_id; v1 (flexible response versions) adds a tagged-field section,
except ApiVersions responses, which always use v0 so a client that sent a version the broker does not
understand can still parse the answer (KIP-511).
"""
from __future__ import annotations

from typing import NamedTuple

from kcoord.protocol import messages
from kcoord.protocol.errors import DecodeError
from kcoord.protocol.primitives import EMPTY_TAGS, INT16, INT32, UVARINT_1BYTE, fixed_struct, skip_tag_section

API_VERSIONS_KEY = 18

_KEY_VERSION_CORRELATION = fixed_struct("hhi")
_SIZE_CORRELATION = fixed_struct("ii")


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int        # where the request body starts in the frame


_flexible_from: dict[int, int | None] = {}


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether (api, version) uses flexible encoding; False for APIs we do not serve."""
    try:
        first = _flexible_from[api_key]
    except KeyError:
        try:
            first = messages.flexible_min_version(api_key)
        except KeyError:
            first = None
        _flexible_from[api_key] = first
    return first is not None and api_version >= first


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def decode_request_header(frame, offset: int = 0) -> RequestHeader:
    """Parse the header at the start of a request frame (the 4-byte size already stripped).

    An unknown api key or version is parsed as header v1, so the broker can still answer it.
    """
    end = len(frame)
    if end - offset < 10:
        raise DecodeError("request header shorter than 10 bytes", api="RequestHeader", offset=offset)
    api_key, api_version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, offset)
    pos = offset + 8
    (n,) = INT16.unpack_from(frame, pos)
    pos += 2
    if n < 0:
        client_id = None
    else:
        if n > end - pos:
            raise DecodeError(f"client_id length {n} exceeds the {end - pos} bytes remaining",
                              api="RequestHeader", offset=pos)
        try:
            client_id = str(frame[pos:pos + n], "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError("client_id is not UTF-8", api="RequestHeader", offset=pos) from e
        pos += n
    if is_flexible(api_key, api_version):
        try:
            pos = skip_tag_section(frame, pos)
        except DecodeError as e:
            raise DecodeError(e.reason, api="RequestHeader", version=2, offset=e.offset) from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def encode_request_header(api_key: int, api_version: int, correlation_id: int,
                          client_id: str | None) -> bytes:
    parts = [_KEY_VERSION_CORRELATION.pack(api_key, api_version, correlation_id)]
    if client_id is None:
        parts.append(b"\xff\xff")
    else:
        raw = client_id.encode("utf-8")
        parts.append(INT16.pack(len(raw)))
        parts.append(raw)
    if is_flexible(api_key, api_version):
        parts.append(EMPTY_TAGS)
    return b"".join(parts)


def encode_request_frame(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                         body: bytes) -> bytes:
    """4-byte size + request header + body (for clients, tests and tools)."""
    header = encode_request_header(api_key, api_version, correlation_id, client_id)
    return b"".join((INT32.pack(len(header) + len(body)), header, body))


def encode_response_frame(correlation_id: int, api_key: int, api_version: int, body) -> bytes:
    """4-byte size + response header (v0, or v1 when flexible; ApiVersions always v0) + body."""
    if response_header_version(api_key, api_version) == 1:
        return b"".join((_SIZE_CORRELATION.pack(len(body) + 5, correlation_id), UVARINT_1BYTE[0], body))
    return b"".join((_SIZE_CORRELATION.pack(len(body) + 4, correlation_id), body))


def decode_response_header(frame, api_key: int, api_version: int, offset: int = 0) -> tuple[int, int]:
    """Parse a response header (size already stripped) -> (correlation_id, body_offset)."""
    if len(frame) - offset < 4:
        raise DecodeError("response header shorter than 4 bytes", api="ResponseHeader", offset=offset)
    (correlation_id,) = INT32.unpack_from(frame, offset)
    pos = offset + 4
    if response_header_version(api_key, api_version) == 1:
        try:
            pos = skip_tag_section(frame, pos)
        except DecodeError as e:
            raise DecodeError(e.reason, api="ResponseHeader", version=1, offset=e.offset) from None
    return correlation_id, pos
