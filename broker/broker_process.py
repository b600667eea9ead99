"""A kcoord server as a child process, for test suites (the pytest plugin's `kafka_broker`) and tools.

    broker = BrokerProcess(workdir, overrides={"num.partitions": "3"}).start()
    broker.bootstrap_servers                 # "127.0.0.1:PORT"
    broker.faults.add("Heartbeat", error="REBALANCE_IN_PROGRESS", group_id="g", count=3)
    broker.timers.expire_member("g", member_id)
    broker.kill()                            # SIGKILL, then start again on the same data and port
    broker.stop()

A child process rather than a server inside the test's process: `kill()` must be a real SIGKILL (an
acknowledged write has to survive it), the test's own event loop and signal handlers stay the test's,
and a crash in the server cannot take the test run down. Start-up is measured in bench/fixture.py.

`start()` returns once the server answers and its __consumer_offsets partitions are loaded (before
that, group requests answer COORDINATOR_LOAD_IN_PROGRESS). The server's log goes to `log_path`.
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

from broker.admin_client import AdminClient, AdminRequestError

READY = re.compile(r"kcoord ready: listening on (\S+?):(\d+)(?:.*?admin on port (\d+))?")
# Kafka defaults that make tests wait, lowered; every one can be overridden.
TEST_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",        # no 3 s wait before a new group's first generation
    "group.min.session.timeout.ms": "100",          # let tests use short sessions
    "offsets.topic.num.partitions": "1",            # one __consumer_offsets partition: loads at once
}
PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[1]  # where this `broker` package is imported from


class BrokerFailed(RuntimeError):
    pass


class BrokerProcess:
    def __init__(self, workdir: str | os.PathLike, overrides: dict[str, object] | None = None,
                 name: str = "kcoord", log_level: str = "INFO", test_settings: bool = True) -> None:
        self.workdir = pathlib.Path(workdir)
        self.data_dir = self.workdir / f"{name}-data"
        self.log_path = self.workdir / f"{name}.log"
        self.overrides = {**(TEST_SETTINGS if test_settings else {}),
                          **{k: str(v) for k, v in (overrides or {}).items()}}
        self.log_level = log_level
        self.host = "127.0.0.1"
        self.port = 0
        self.admin_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._pump: threading.Thread | None = None
        self._ready = threading.Event()

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> BrokerProcess:
        if self.running:
            raise BrokerFailed("already running")
        props = {"listeners": f"PLAINTEXT://{self.host}:{self.port}", "log.dirs": str(self.data_dir),
                 "kcoord.admin.listener": f"http://{self.host}:{self.admin_port or 0}", **self.overrides}
        cmd = [sys.executable, "-m", "broker", "serve", "--log-level", self.log_level]
        for key, value in props.items():
            cmd += ["--override", f"{key}={value}"]
        # The server runs the same `broker` package as this process (a checkout or an install).
        path = os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._ready.clear()
        self.proc = subprocess.Popen(cmd, cwd=str(self.workdir), env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._pump = threading.Thread(target=self._pump_output, args=(self.proc,), daemon=True)
        self._pump.start()
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.01):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                code = self.proc.poll()
                self.kill(restart=False)
                raise BrokerFailed(f"kcoord did not become ready (exit code {code}); log:\n{self.log_text()}")
        self._wait_loaded(deadline)
        return self

    def _wait_loaded(self, deadline: float) -> None:
        while True:
            try:
                if self.admin.request("GET", "/health").get("groups_loaded", True):
                    return
            except AdminRequestError:
                pass
            if time.monotonic() > deadline or not self.running:
                raise BrokerFailed(f"kcoord did not load its groups in time; log:\n{self.log_text()}")
            time.sleep(0.005)

    def _pump_output(self, proc: subprocess.Popen) -> None:
        with open(self.log_path, "ab", buffering=0) as out:
            for line in proc.stdout:
                out.write(line)
                match = READY.search(line.decode("utf-8", "replace"))
                if match:
                    self.port = int(match.group(2))
                    self.admin_port = int(match.group(3)) if match.group(3) else None
                    self._ready.set()

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait for the graceful exit (SIGKILL after `timeout`); returns the exit code."""
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

    def kill(self, restart: bool = True, timeout: float = 30.0) -> BrokerProcess:
        """SIGKILL, as in a crash (no shutdown at all); then, unless restart=False, start again on the
        same data directory and port, as a supervisor would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._join_pump()
        return self.start(timeout) if restart else self

    def restart(self, timeout: float = 30.0) -> BrokerProcess:
        """Graceful stop, then start on the same data directory and port."""
        self.stop()
        return self.start(timeout)

    def _join_pump(self) -> None:
        if self._pump is not None:
            self._pump.join(10)
            self._pump = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    # -- what tests use ---------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.host}:{self.admin_port}"

    @property
    def admin(self) -> AdminClient:
        return AdminClient(self.admin_url)

    @property
    def faults(self):
        """broker.admin_client.Faults: add(api, error=..., group_id=..., count=...), list(), clear()."""
        return self.admin.faults

    @property
    def timers(self):
        """broker.admin_client.Timers: expire_member(group, member), fire(group), run_retention()."""
        return self.admin.timers

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, pattern: str, timeout: float = 10.0) -> re.Match:
        """Wait until the server's log matches `pattern` (a regex); AssertionError after `timeout`."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            match = regex.search(self.log_text())
            if match:
                return match
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line matching {pattern!r} within {timeout}s")
            time.sleep(0.02)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<kcoord {self.bootstrap_servers} data={self.data_dir} {'running' if self.running else 'stopped'}>"
