"""Heartbeats over TLS against plaintext, same server, same members, same run.

One kcoord with a PLAINTEXT and an SSL listener (a PEM keystore made for the run, TLS 1.3). Members join
for real over plaintext (Kafka members are not tied to a connection); then one Python (uvloop) generator
opens one connection per member to one listener or the other and keeps one Heartbeat v4 in flight on each
for a fixed time. Reps alternate plaintext / TLS; ratio = median over rep pairs of TLS heartbeats/s /
plaintext heartbeats/s. The generator does its side of TLS too, on the same 2 cores, so the ratio is of
the whole loopback system, not of the server alone; server CPU per heartbeat is reported for both, and
server CPU per connection opened (the TLS handshake's cost; the members connect one at a time).
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import tempfile
import time
from pathlib import Path

from bench.loadgen import free_port
from bench.loadgen_members import form_groups
from bench.loadgen_server import KcoordServer
from bench.runner import arun, main, median, proc_cpu_seconds, raise_nofile, settings

GROUP_SIZE = 100
_SIZE = struct.Struct(">i")


class _Beat(asyncio.BufferedProtocol):
    """One member's connection: a heartbeat, wait for its answer, the next one. Buffered: given a plain
    protocol, the loop's SSL protocol would decrypt each answer into a fresh 256 KiB bytes object (an
    mmap and an munmap in glibc), a cost of the generator, not of the server measured."""

    def __init__(self, frame: bytes, counter: list[int], stop: list[bool]) -> None:
        self.frame, self.counter, self.stop = frame, counter, stop
        self.buf = b""
        self.view = memoryview(bytearray(64 * 1024))

    def connection_made(self, transport) -> None:
        self.transport = transport

    def start(self) -> None:
        self.transport.write(self.frame)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        self.buf += self.view[:nbytes]
        while len(self.buf) >= 4:
            (size,) = _SIZE.unpack_from(self.buf)
            if len(self.buf) < 4 + size:
                return
            self.buf = self.buf[4 + size:]
            self.counter[0] += 1
            if not self.stop[0]:
                self.transport.write(self.frame)


async def _rep(port: int, frames: list[bytes], ctx: ssl.SSLContext | None, seconds: float, pid: int) -> dict:
    loop = asyncio.get_running_loop()
    counter, stop = [0], [False]
    conns = []
    connect_cpu = proc_cpu_seconds(pid)
    for frame in frames:
        _t, proto = await loop.create_connection(lambda f=frame: _Beat(f, counter, stop), "127.0.0.1", port,
                                                 ssl=ctx, server_hostname="localhost" if ctx else None)
        conns.append(proto)
    connect_cpu = proc_cpu_seconds(pid) - connect_cpu  # accepting (and the TLS handshakes), one at a time
    for c in conns:
        c.start()
    await asyncio.sleep(0.5)  # warm-up
    start_count, start_cpu, t0 = counter[0], proc_cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    done, cpu, elapsed = counter[0] - start_count, proc_cpu_seconds(pid) - start_cpu, time.monotonic() - t0
    stop[0] = True
    await asyncio.sleep(0.2)
    for c in conns:
        c.transport.close()
    return {"rps": done / elapsed, "server_cpu_us": cpu / max(done, 1) * 1e6,
            "connect_cpu_us": connect_cpu / len(frames) * 1e6}


def measure(members_n: int, seconds: float, reps: int) -> dict:
    from tests.support.certs import TestPki  # certificates made for the run (cryptography, test extra)

    pki = TestPki(Path(tempfile.mkdtemp(prefix="kcoord-bench-pki-")))
    client_ctx = ssl.create_default_context(cafile=str(pki.ca))
    tls_port = free_port()
    plain_port = free_port()
    server = KcoordServer(overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{tls_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{tls_port}",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server_pem)})
    server.port = plain_port  # what wait_ready probes
    with server:
        arun(server.wait_ready())
        groups = {f"hbtls-{g}": GROUP_SIZE for g in range(max(1, members_n // GROUP_SIZE))}
        members = arun(form_groups(plain_port, groups, conns=members_n))
        frames = [m.heartbeat_frame() for m in members]
        plain, tls = [], []
        for _ in range(reps):
            plain.append(arun(_rep(plain_port, frames, None, seconds, server.pid)))
            tls.append(arun(_rep(tls_port, frames, client_ctx, seconds, server.pid)))
    return {"plain": plain, "tls": tls,
            "ratio": median([t["rps"] / p["rps"] for p, t in zip(plain, tls, strict=True)]),
            "cpu_ratio": median([t["server_cpu_us"] / p["server_cpu_us"] for p, t in zip(plain, tls, strict=True)])}


def run(quick: bool = False) -> dict:
    raise_nofile()
    members_n, seconds, reps = (100, 1.0, 3) if quick else (200, 2.0, 5)
    r = measure(members_n, seconds, reps)
    return {
        "name": "heartbeat_tls",
        "settings": settings(members=members_n, group_size=GROUP_SIZE, seconds_per_rep=seconds, reps=reps,
                             request="Heartbeat v4", tls=ssl.OPENSSL_VERSION, generator="Python uvloop"),
        "rows": [{
            "members": members_n,
            "plaintext heartbeats/s": median([p["rps"] for p in r["plain"]]),
            "TLS heartbeats/s": median([t["rps"] for t in r["tls"]]),
            "ratio TLS/plaintext": r["ratio"],
            "server cpu us/hb plaintext": median([p["server_cpu_us"] for p in r["plain"]]),
            "server cpu us/hb TLS": median([t["server_cpu_us"] for t in r["tls"]]),
            "cpu ratio TLS/plaintext": r["cpu_ratio"],
            "server cpu us/connection plaintext": median([p["connect_cpu_us"] for p in r["plain"]]),
            "server cpu us/connection TLS": median([t["connect_cpu_us"] for t in r["tls"]]),
        }],
        "notes": ["ratio = median over alternating rep pairs of TLS / plaintext heartbeats/s, one server, the "
                  "same members and frames, the same Python generator (which also pays for its TLS)."],
    }


if __name__ == "__main__":
    main(run)
