"""A minimal blocking Kafka client over a plain socket, for tests that send exact bytes.

    with RawKafka(port) as c:
        resp = c.request(18, 3, m.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        c.send_raw(b"\\x00\\x00\\x00\\x05junk"); assert c.closed_by_peer()
Every socket operation has a timeout.
"""
from __future__ import annotations

import socket
import struct
import time

from kcoord.protocol import messages as m
from kcoord.protocol.headers import decode_response_header, encode_request_frame

TIMEOUT_S = 10.0


class RawKafka:
    def __init__(self, port: int, host: str = "127.0.0.1", client_id: str | None = "raw-test") -> None:
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT_S)
        self.sock.settimeout(TIMEOUT_S)
        self.client_id = client_id
        self._correlation = 0

    def __enter__(self) -> RawKafka:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def next_correlation_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def send_request(self, api_key: int, version: int, body_obj=None, body: bytes | None = None,
                     correlation_id: int | None = None) -> int:
        if body is None:
            body = m.request_codec(api_key, version).encode(body_obj)
        cid = self.next_correlation_id() if correlation_id is None else correlation_id
        self.sock.sendall(encode_request_frame(api_key, version, cid, self.client_id, body))
        return cid

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exact(4))
        return self._read_exact(size)

    def read_response(self, api_key: int, version: int, decode_version: int | None = None):
        """-> (correlation_id, decoded response)."""
        frame = self.read_frame()
        cid, pos = decode_response_header(frame, api_key, version)
        obj, _ = m.response_codec(api_key, version if decode_version is None else decode_version).decode(frame, pos)
        return cid, obj

    def request(self, api_key: int, version: int, body_obj):
        cid = self.send_request(api_key, version, body_obj)
        got, resp = self.read_response(api_key, version)
        assert got == cid, f"correlation id {got} != {cid}"
        return resp

    def closed_by_peer(self, timeout: float = TIMEOUT_S) -> bool:
        """True once the server closes the connection (EOF or reset) within `timeout`."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.2)
        try:
            while time.monotonic() < deadline:
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    continue
                except ConnectionResetError:
                    return True
                if not data:
                    return True
            return False
        finally:
            self.sock.settimeout(TIMEOUT_S)

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)
