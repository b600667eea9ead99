"""The real kcoord server as a subprocess, on an ephemeral loopback port, for benchmarks.

Started through the CLI (`kcoord serve` with --override), exactly as a user would, with its
data in a fresh temporary directory unless one is given. Ready means FindCoordinator answers
without COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import loadgen_wire as w
from bench.loadgen import free_port
from bench.loadgen_client import KafkaConn
from bench.runner import ROOT

_LAUNCH = "import sys; from kcoord.tools.cli import main; sys.exit(main())"
# `python -m bench --profile` sets this: every server then runs under pyinstrument and leaves
# a text profile in bench/results/profiles/ (what the report's bottleneck summaries come from).
PROFILE_ENV = "KCOORD_BENCH_PROFILE"


class KcoordServer:
    def __init__(
        self, overrides: dict | None = None, data_dir: str | None = None, log_level: str = "WARNING"
    ):
        self.port = free_port()
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="kcoord-bench-")
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": self.data_dir,
            "group.initial.rebalance.delay.ms": "0",
            **(overrides or {}),
        }
        args = [sys.executable, "-c", _LAUNCH, "serve", "--log-level", log_level]
        profile_dir = os.environ.get(PROFILE_ENV)
        if profile_dir:
            os.makedirs(profile_dir, exist_ok=True)
            out = os.path.join(profile_dir, f"kcoord-{time.strftime('%H%M%S')}-{self.port}.txt")
            args[1:1] = ["-m", "pyinstrument", "-r", "text", "--no-color", "-o", out]
        for k, v in props.items():
            args += ["--override", f"{k}={v}"]
        self.log_path = Path(self.data_dir).parent / f"kcoord-bench-{self.port}.log"  # the server's stdout+stderr
        self._log = open(self.log_path, "w")  # noqa: SIM115
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid

    async def wait_ready(
        self, timeout: float = 120, probe_groups: tuple[str, ...] = ("bench-probe",), fetch: bool = False
    ) -> float:
        """Seconds from process start until every probe group's coordinator answers (and, with
        `fetch`, its OffsetFetch answers without COORDINATOR_LOAD_IN_PROGRESS)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kcoord exited with {self.proc.returncode}; see {self._log.name}")
            try:
                conn = await KafkaConn.open(self.port)
            except OSError:
                await asyncio.sleep(0.01)
                continue
            try:
                while time.monotonic() < end:
                    if await self._all_loaded(conn, probe_groups, fetch):
                        return time.monotonic() - self.started_at
                    await asyncio.sleep(0.01)
            finally:
                conn.close()
        raise TimeoutError(f"kcoord not ready after {timeout}s")

    @staticmethod
    async def _all_loaded(conn: KafkaConn, groups, fetch: bool) -> bool:
        for g in groups:
            fc = w.parse_find_coordinator(
                await conn.call(w.FIND_COORDINATOR, w.FIND_COORDINATOR_V, w.find_coordinator(g))
            )
            if fc != w.NONE:
                return False
            if not fetch:
                continue
            err, _, _ = w.parse_offset_fetch(
                await conn.call(w.OFFSET_FETCH, w.OFFSET_FETCH_V, w.offset_fetch(g, None))
            )
            if err == w.COORDINATOR_LOAD_IN_PROGRESS:
                return False
        return True

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
