"""A small blocking Kafka wire client built on our own codecs: what `kcoord groups` and the raw
protocol tests use to talk to a broker.

    with KafkaWireClient.connect("127.0.0.1:9092") as client:
        versions = client.api_versions()                      # {api_key: (min, max)} as advertised
        resp = client.request(m.ListGroupsRequest(), version=4)

Requests can also be pipelined on one connection (`send` now, `receive` later), which is how a test
parks a JoinGroup while it does something else on another connection.
"""
from __future__ import annotations

import socket
import struct
from collections import deque

from kcoord.protocol import messages as m
from kcoord.protocol.headers import decode_response_header, encode_request_frame

API_VERSIONS_KEY = 18
_INT32 = struct.Struct(">i")


class WireError(Exception):
    """The connection failed or the broker answered something we cannot read."""


def parse_address(address: str, default_port: int = 9092) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    if not host:
        return port, default_port
    return host.strip("[]"), int(port)


class KafkaWireClient:
    # TLS / SASL settings for every connection the tools open (kcoord.tools.client_login.ClientSecurity,
    # from --command-config); None: plaintext
    default_security = None

    def __init__(self, sock: socket.socket, client_id: str = "kcoord-cli") -> None:
        self._sock = sock
        self.client_id = client_id
        self._next_correlation_id = 1
        self._in_flight: deque[tuple[int, int, int]] = deque()  # (correlation_id, api_key, version)
        self.versions: dict[int, tuple[int, int]] = {}

    @classmethod
    def connect(cls, address: str, timeout: float = 30.0, client_id: str = "kcoord-cli") -> KafkaWireClient:
        host, port = parse_address(address)
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        security = cls.default_security
        if security is None:
            return cls(sock, client_id)
        client = cls(security.wrap(sock, host), client_id)
        security.login(client)
        return client

    def close(self) -> None:
        self._sock.close()

    @property
    def address(self) -> str:
        """host:port of the broker at the other end."""
        host, port = self._sock.getpeername()[:2]
        return f"{host}:{port}"

    def __enter__(self) -> KafkaWireClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def set_timeout(self, seconds: float | None) -> None:
        self._sock.settimeout(seconds)

    # ------------------------------------------------------------------ framing
    def send(self, request, version: int, api_key: int | None = None) -> int:
        """Write one request; returns its correlation id. Responses come back in request order."""
        api_key = api_key if api_key is not None else _api_key_of(request)
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        body = m.request_codec(api_key, version).encode(request)
        self._sock.sendall(encode_request_frame(api_key, version, correlation_id, self.client_id, body))
        self._in_flight.append((correlation_id, api_key, version))
        return correlation_id

    def receive(self):
        """Read the response to the oldest request in flight."""
        correlation_id, api_key, version = self._in_flight.popleft()
        frame = self._read_frame()
        got, body_offset = decode_response_header(frame, api_key, version)
        if got != correlation_id:
            raise WireError(f"correlation id {got}, expected {correlation_id}")
        obj, _end = m.response_codec(api_key, version).decode(frame, body_offset)
        return obj

    def request(self, request, version: int | None = None, api_key: int | None = None):
        api_key = api_key if api_key is not None else _api_key_of(request)
        if version is None:
            version = self.best_version(api_key)
        self.send(request, version, api_key)
        return self.receive()

    def _read_frame(self) -> bytes:
        (size,) = _INT32.unpack(self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise WireError("connection closed by the broker")
            chunks += chunk
        return bytes(chunks)

    # ------------------------------------------------------------------ negotiation
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """ApiVersions v0 (understood by every broker); remembers the advertised ranges."""
        resp = self.request(m.ApiVersionsRequest(), version=0, api_key=API_VERSIONS_KEY)
        if resp.error_code:
            raise WireError(f"ApiVersions failed with error {resp.error_code}")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        return self.versions

    def best_version(self, api_key: int) -> int:
        """Highest version both the broker advertises and our codecs know."""
        if not self.versions:
            self.api_versions()
        if api_key not in self.versions:
            raise WireError(f"the broker does not serve api key {api_key}")
        low, high = self.versions[api_key]
        ours_low, ours_high = m.api_versions_range(api_key)
        if max(low, ours_low) > min(high, ours_high):
            raise WireError(f"no common version for api key {api_key}")
        return min(high, ours_high)


def _api_key_of(request) -> int:
    name = type(request).__name__
    if not name.endswith("Request"):
        raise TypeError(f"{name} is not a request")
    return m.API_KEYS[name[: -len("Request")]]
