"""The connection's protocol layer: bytes in, parsed requests out; responses encoded; flow-control
decisions. No I/O here, so tests drive it by feeding bytes (broker/server.py owns the socket).

Kafka's rules that shape it:
- a request is a 4-byte big-endian size + header + body; a size above socket.request.max.bytes, a header
  that does not parse, or an api key we do not serve closes that connection (Kafka's SocketServer does
  the same: it cannot tell where the next request would start, or what to answer);
- ApiVersions at a version we do not serve is answered (UNSUPPORTED_VERSION + a v0 body listing our
  ApiVersions range, KIP-511), because every client probes with a version newer than the broker's;
- any other api at a version outside our range closes the connection, as Kafka's request parsing does;
- requests are processed one at a time and answered in order, but reading runs ahead up to a high-water
  mark of queued requests, then pauses until the queue drains to the low-water mark.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kcoord.broker import registry
from kcoord.protocol import messages as m
from kcoord.protocol.errors import DecodeError
from kcoord.protocol.framing import FrameSplitter
from kcoord.protocol.headers import RequestHeader, decode_request_header, encode_response_frame

API_VERSIONS_KEY = 18


class CloseConnection(Exception):
    """Close this connection (only), logging `reason` as one line: the one way anything says "close".

    Raised where serving finds the connection cannot go on -- the peer broke the protocol (framing, header,
    api key, version), its SASL session refuses a request, an acks=0 Produce failed (the client expects no
    answer, so closing is how it learns), a test hook or an injected fault asks for it. It is an expected
    outcome, not a bug: broker/server.py catches it in one place and logs the reason without a traceback.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(slots=True)
class Request:
    header: RequestHeader
    spec: registry.ApiSpec
    body: Any                 # decoded request object; None for an ApiVersions probe we cannot decode
    response_version: int     # version to encode the answer with (0 for the ApiVersions fallback)
    size: int                 # frame size in bytes, for metrics

    @property
    def unsupported_version(self) -> bool:
        return not self.spec.supports(self.header.api_version)


def parse_request(frame: bytes | memoryview) -> Request:
    """Decode one frame's header and body, or raise CloseConnection saying why we must close."""
    try:
        header = decode_request_header(frame)
    except DecodeError as exc:
        raise CloseConnection(f"malformed request header: {exc}") from exc
    spec = registry.lookup(header.api_key)
    if spec is None:
        raise CloseConnection(f"unknown api key {header.api_key} (version {header.api_version}, "
                                f"correlation id {header.correlation_id})")
    if not spec.supports(header.api_version):
        if header.api_key == API_VERSIONS_KEY:
            return Request(header, spec, None, 0, len(frame))
        raise CloseConnection(f"unsupported version {header.api_version} of {spec.name} "
                                f"(served: {spec.min_version}-{spec.max_version})")
    try:
        body, _end = _request_codec(header.api_key, header.api_version).decode(frame, header.body_offset)
    except DecodeError as exc:
        raise CloseConnection(f"malformed {spec.name} v{header.api_version} request: {exc}") from exc
    return Request(header, spec, body, header.api_version, len(frame))


def encode_response(request: Request, response: Any) -> bytes:
    """The whole response frame (size + header + body) for `request`."""
    key, version = request.header.api_key, request.response_version
    body = _response_codec(key, version).encode(response)
    return encode_response_frame(request.header.correlation_id, key, version, body)


# Per-request lookups of the same few codecs, keyed by (api_key, version): m.request_codec builds the
# message name and goes through functools.cache on every call.
_request_codecs: dict[tuple[int, int], m.Codec] = {}
_response_codecs: dict[tuple[int, int], m.Codec] = {}


def _request_codec(key: int, version: int) -> m.Codec:
    codec = _request_codecs.get((key, version))
    if codec is None:
        codec = _request_codecs[key, version] = m.request_codec(key, version)
    return codec


def _response_codec(key: int, version: int) -> m.Codec:
    codec = _response_codecs.get((key, version))
    if codec is None:
        codec = _response_codecs[key, version] = m.response_codec(key, version)
    return codec


# Bytes of whole, unanswered requests a connection may hold before reading pauses (one frame may
# exceed it: it is already read; reading then waits until the queue drains).
DEFAULT_MAX_QUEUED_BYTES = 32 * 1024 * 1024


class ConnectionState:
    """Framing and read-ahead accounting for one connection.

    `receive` returns complete frames; `pending` counts frames received but not yet answered and
    `pending_bytes` their size. The I/O layer asks `should_pause` after queueing and `should_resume`
    after each answer: reading pauses at `high_water` requests or `max_queued_bytes`, and resumes
    once at most `low_water` requests and a quarter of the bytes are left.
    """

    def __init__(self, max_request_bytes: int, high_water: int = 32, low_water: int = 8,
                 max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES) -> None:
        if not 0 <= low_water < high_water:
            raise ValueError("need 0 <= low_water < high_water")
        self._splitter = FrameSplitter(max_request_bytes)
        self.high_water = high_water
        self.low_water = low_water
        self.max_queued_bytes = max_queued_bytes
        self.pending = 0
        self.pending_bytes = 0
        self.reading_paused = False

    def receive(self, data: bytes) -> list[memoryview]:
        """Complete frames in `data` (views over immutable bytes, safe to queue)."""
        try:
            frames = self._splitter.feed(data)
        except DecodeError as exc:
            if data[:2] == b"\x16\x03" and self.pending == 0:  # a TLS handshake record (ClientHello)
                raise CloseConnection(f"a TLS handshake on a plaintext listener (bad frame: {exc})") from exc
            raise CloseConnection(f"bad frame: {exc}") from exc
        self.pending += len(frames)
        self.pending_bytes += sum(len(f) for f in frames)
        return frames

    def takes_whole(self, size: int) -> bool:
        """A read that is exactly one frame of `size` bytes (after the prefix) may be served straight
        away when nothing is queued or half-read before it; `served_whole` then accounts for it."""
        splitter = self._splitter
        return self.pending == 0 and splitter.buffered == 0 and 0 <= size <= splitter.max_frame_bytes

    def served_whole(self, size: int) -> None:
        self._splitter.skip(size)

    def serving_whole(self, size: int) -> None:
        """Like `served_whole`, for a frame whose answer comes later: it counts as pending (for
        read-ahead and idleness) until `request_done(size)`."""
        self._splitter.skip(size)
        self.pending += 1
        self.pending_bytes += size

    def should_pause(self) -> bool:
        if not self.reading_paused and (self.pending >= self.high_water
                                        or self.pending_bytes >= self.max_queued_bytes):
            self.reading_paused = True
            return True
        return False

    def request_done(self, size: int) -> None:
        self.pending -= 1
        self.pending_bytes -= size

    def should_resume(self) -> bool:
        if (self.reading_paused and self.pending <= self.low_water
                and self.pending_bytes <= self.max_queued_bytes // 4):
            self.reading_paused = False
            return True
        return False
