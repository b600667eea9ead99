"""Start the REAL kcoord server as a subprocess, for integration tests and tools.

    with KcoordServer(tmp_path) as srv:          # binds 127.0.0.1 on an ephemeral port
        KafkaProducer(bootstrap_servers=srv.bootstrap) ...
        srv.restart()                             # same data dir, same port
        assert "kcoord stopped" in srv.log_text()

The server's stderr (its log) and stdout go to `log_path`; `start` returns once the server printed its
ready line. Every wait is bounded.
"""
from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
READY = re.compile(r"kcoord ready: listening on (\S+?):(\d+)")
METRICS = re.compile(r"metrics on port (\d+)")
ADMIN = re.compile(r"admin on port (\d+)")


class ServerFailed(RuntimeError):
    pass


class KcoordServer:
    def __init__(self, workdir: str | os.PathLike, overrides: dict[str, str] | None = None,
                 name: str = "kcoord", log_level: str = "INFO") -> None:
        self.workdir = pathlib.Path(workdir)
        self.data_dir = self.workdir / f"{name}-data"
        self.log_path = self.workdir / f"{name}.log"
        self.overrides = dict(overrides or {})
        self.log_level = log_level
        self.host = "127.0.0.1"
        self.port = 0
        self.metrics_port: int | None = None
        self.admin_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._pump: threading.Thread | None = None
        self._ready = threading.Event()
        self._log_lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> KcoordServer:
        if self.proc is not None and self.proc.poll() is None:
            raise ServerFailed("already running")
        props = {"listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dirs": str(self.data_dir)}
        props.update(self.overrides)
        cmd = [sys.executable, "-m", "broker", "serve", "--log-level", self.log_level]
        for key, value in props.items():
            cmd += ["--override", f"{key}={value}"]
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._ready.clear()
        self.proc = subprocess.Popen(cmd, cwd=str(self.workdir), env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._pump = threading.Thread(target=self._pump_output, args=(self.proc,), daemon=True)
        self._pump.start()
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                code = self.proc.poll()
                self.kill()
                raise ServerFailed(f"server did not become ready (exit code {code}); log:\n{self.log_text()}")
        return self

    def _pump_output(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        with open(self.log_path, "ab", buffering=0) as out:
            for line in proc.stdout:
                with self._log_lock:
                    out.write(line)
                text = line.decode("utf-8", "replace")
                match = READY.search(text)
                if match:
                    self.port = int(match.group(2))
                    metrics = METRICS.search(text)
                    self.metrics_port = int(metrics.group(1)) if metrics else None
                    admin = ADMIN.search(text)
                    self.admin_port = int(admin.group(1)) if admin else None
                    self._ready.set()

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait for a graceful exit; returns the exit code (SIGKILL after `timeout`)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._join_pump()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: no shutdown at all, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._join_pump()

    def restart(self, timeout: float = 30.0) -> KcoordServer:
        """Stop (if running) and start again on the same port with the same data."""
        self.stop()
        return self.start(timeout)

    def _join_pump(self) -> None:
        if self._pump is not None:
            self._pump.join(10)
            self._pump = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # -- what tests use ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def log_text(self) -> str:
        with self._log_lock:
            try:
                return self.log_path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                return ""

    def wait_for_log(self, pattern: str, timeout: float = 10.0) -> re.Match:
        """Wait until a log line matches `pattern` (a regex); bounded by `timeout`."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.log_text())
            if match:
                return match
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line matching {pattern!r} within {timeout}s:\n{self.log_text()}")
            time.sleep(0.05)

    def __enter__(self) -> KcoordServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.running:
            self.stop()
