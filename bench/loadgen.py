"""Python side of the C load generator: compile it, run it, start its trivial server.

The binary is built from bench/loadgen.c into bench/results/.build (git-ignored), keyed by a
hash of the source so an edit rebuilds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import tempfile
from pathlib import Path

from bench.runner import RESULTS

SOURCE = Path(__file__).with_name("loadgen.c")


def binary() -> Path:
    src = SOURCE.read_bytes()
    out = RESULTS / ".build" / f"loadgen-{hashlib.sha256(src).hexdigest()[:12]}"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        subprocess.run(["gcc", "-O2", "-Wall", "-o", str(tmp), str(SOURCE)], check=True, timeout=120)
        tmp.rename(out)
    return out


def free_port() -> int:
    """An ephemeral loopback port (bind 0, read it back, release it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_frames(frames: list[bytes]) -> str:
    """Frames (each already size-prefixed) to a temporary file the generator reads."""
    fd, path = tempfile.mkstemp(prefix="kcoord-frames-", suffix=".bin")
    with os.fdopen(fd, "wb") as f:
        for frame in frames:
            f.write(frame)
    return path


def drive(
    port: int,
    frames: list[bytes],
    conns: int,
    seconds: float,
    warmup: float,
    err_offset: int = -1,
    server_pid: int | None = None,
) -> dict:
    """Run the closed loop: `conns` connections, one request in flight each, for `seconds`
    after `warmup`. Returns the generator's JSON (rps, p50_us, p99_us, errors, ...). With
    `server_pid`, also server_cpu_s and gen_cpu_s: the server's and the generator's CPU seconds
    inside the measured window itself (connecting, warm-up and teardown excluded)."""
    path = write_frames(frames)
    try:
        out = subprocess.run(
            [
                str(binary()),
                "run",
                "127.0.0.1",
                str(port),
                path,
                str(conns),
                str(seconds),
                str(warmup),
                str(err_offset),
                *([str(server_pid)] if server_pid else []),
            ],
            capture_output=True,
            text=True,
            timeout=seconds + warmup + 120,
            check=False,
        )
    finally:
        os.unlink(path)
    if out.returncode != 0:
        raise RuntimeError(f"loadgen failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout)


class CServer:
    """The generator's own fixed-answer server: measures what the generator can drive."""

    def __init__(self, response_payload: bytes, lifetime: float = 600):
        self.port = free_port()
        fd, self._resp = tempfile.mkstemp(prefix="kcoord-resp-")
        with os.fdopen(fd, "wb") as f:
            f.write(response_payload)
        self.proc = subprocess.Popen(
            [str(binary()), "serve", str(self.port), self._resp, str(lifetime)],
            stdout=subprocess.PIPE,
            text=True,
        )
        if self.proc.stdout.readline().strip() != "listening":
            self.close()
            raise RuntimeError("loadgen server did not start")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if os.path.exists(self._resp):
            os.unlink(self._resp)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
