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
import time

from kcoord.broker.admin_client import AdminClient, AdminRequestError
from kcoord.testkit.launcher import Launcher, child_env

READY = re.compile(r"kcoord ready: listening on (\S+?):(\d+)(?:.*?metrics on port (\d+))?(?:.*?admin on port (\d+))?")
# Kafka defaults that make tests wait, lowered; every one can be overridden.
TEST_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",        # no 3 s wait before a new group's first generation
    "group.min.session.timeout.ms": "100",          # let tests use short sessions
    "offsets.topic.num.partitions": "1",            # one __consumer_offsets partition: loads at once
}


class BrokerFailed(RuntimeError):
    pass


class BrokerProcess:
    def __init__(self, workdir: str | os.PathLike, overrides: dict[str, object] | None = None,
                 name: str = "kcoord", log_level: str = "INFO", test_settings: bool = True,
                 launcher: Launcher | None = None, env: dict[str, str] | None = None, admin: bool = True) -> None:
        self.workdir = pathlib.Path(workdir)
        self.data_dir = self.workdir / f"{name}-data"
        self.log_path = self.workdir / f"{name}.log"
        self.status_path = self.workdir / f"{name}.exit"  # a launcher's broker writes its exit status here
        self.overrides = {**(TEST_SETTINGS if test_settings else {}),
                          **{k: str(v) for k, v in (overrides or {}).items()}}
        self.log_level = log_level
        self.launcher = launcher  # None: a fresh interpreter per start (python -m kcoord.tools serve)
        self.env = dict(env or {})
        self.admin_listener = admin  # the admin endpoint (faults, timers) on a free port
        self.host = "127.0.0.1"
        self.port = 0
        self.admin_port: int | None = None
        self.metrics_port: int | None = None
        self.pid: int | None = None
        self.returncode: int | None = None
        self._popen: subprocess.Popen | None = None
        self._log_offset = 0

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> BrokerProcess:
        if self.running:
            raise BrokerFailed("already running")
        props = {"listeners": f"PLAINTEXT://{self.host}:{self.port}", "log.dirs": str(self.data_dir)}
        if self.admin_listener:
            props["kcoord.admin.listener"] = f"http://{self.host}:{self.admin_port or 0}"
        props.update(self.overrides)
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()  # the ready line of this start is after what is there
        self.returncode = None
        if self.launcher is not None:
            self._popen = None
            self.status_path.unlink(missing_ok=True)
            self.pid = self.launcher.spawn(props, str(self.workdir), str(self.log_path), self.env, self.log_level,
                                           str(self.status_path))
        else:  # a plain `kcoord serve` process
            argv = ["serve", "--log-level", self.log_level]
            for key, value in props.items():
                argv += ["--override", f"{key}={value}"]
            env = child_env(self.env)
            with open(self.log_path, "ab") as log:
                self._popen = subprocess.Popen([sys.executable, "-m", "kcoord.tools", *argv], cwd=str(self.workdir),
                                               env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            self.pid = self._popen.pid
        deadline = time.monotonic() + timeout
        try:
            self._wait_ready(deadline)
            self._wait_loaded(deadline)
        except BrokerFailed:
            self.kill(restart=False)
            raise
        return self

    def _wait_ready(self, deadline: float) -> None:
        while True:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                match = READY.search(log.read().decode("utf-8", "replace"))
            if match:
                self.port = int(match.group(2))
                self.admin_port = int(match.group(4)) if match.group(4) else None
                self.metrics_port = int(match.group(3)) if match.group(3) else None
                return
            if not self.running or time.monotonic() > deadline:
                raise BrokerFailed(f"kcoord did not become ready (exit code {self.returncode}); log:\n"
                                   f"{self.log_text()}")
            time.sleep(0.002)

    def _wait_loaded(self, deadline: float) -> None:
        if self.admin_port is None:
            return  # no admin endpoint to ask (a caller's overrides turned it off)
        while True:
            try:
                if self.admin.request("GET", "/health").get("groups_loaded", True):
                    return
            except AdminRequestError:
                pass
            if time.monotonic() > deadline or not self.running:
                raise BrokerFailed(f"kcoord did not load its groups in time; log:\n{self.log_text()}")
            time.sleep(0.002)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait for the graceful exit (SIGKILL after `timeout`); returns the exit code."""
        if self.running and self._signal(signal.SIGTERM):
            if not self._wait_exit(timeout) and self._signal(signal.SIGKILL):
                self._wait_exit(10)
        return self.returncode

    def kill(self, restart: bool = True, timeout: float = 30.0) -> BrokerProcess:
        """SIGKILL, as in a crash (no shutdown at all); then, unless restart=False, start again on the
        same data directory and port, as a supervisor would."""
        if self.running and self._signal(signal.SIGKILL):
            self._wait_exit(30)
        return self.start(timeout) if restart else self

    def _signal(self, sig: signal.Signals) -> bool:
        """Send `sig`; False when the process is already gone (it may exit between `running` and the kill)."""
        assert self.pid is not None
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            _ = self.running  # records the exit status
            return False
        return True

    def restart(self, timeout: float = 30.0) -> BrokerProcess:
        """Graceful stop, then start on the same data directory and port."""
        self.stop()
        return self.start(timeout)

    def _wait_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.running:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    @property
    def running(self) -> bool:
        if self.pid is None:
            return False
        if self._popen is not None:
            self.returncode = self._popen.poll()
            return self.returncode is None
        try:  # a launcher's child: the kernel reaps it, so a dead one is gone
            os.kill(self.pid, 0)
            alive = _state(self.pid) != "Z"
        except ProcessLookupError:
            alive = False
        if not alive:
            self.returncode = self._exit_status()
        return alive

    def _exit_status(self) -> int | None:
        """A launcher's broker's exit status, from the file it wrote as it exited (none: it was killed)."""
        try:
            return int(self.status_path.read_text())
        except (OSError, ValueError):
            return -signal.SIGKILL

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
        """kcoord.broker.admin_client.Faults: add(api, error=..., group_id=..., count=...), list(), clear()."""
        return self.admin.faults

    @property
    def timers(self):
        """kcoord.broker.admin_client.Timers: expire_member(group, member), fire(group), run_retention()."""
        return self.admin.timers

    def client_metrics(self, client_id: str | None = None) -> dict[str, float]:
        """What clients pushed through KIP-714 telemetry (needs kcoord.client.telemetry.enable=true or a
        CLIENT_METRICS resource): {metric name[{attributes}]: latest value}, of the clients with this
        client.id (all when None)."""
        return self.admin.client_metrics(client_id)

    def clients(self, client_id: str | None = None) -> list[dict]:
        """The client instances known to the telemetry receiver, with their subscriptions and metrics."""
        return self.admin.clients(client_id)

    # the coordinators' test controls on the admin endpoint (kcoord.broker.admin_http): `of` is "coordinator"
    # (__consumer_offsets, the group coordinator) or "transactions" (__transaction_state)
    def hold_load(self, partitions, of: str = "coordinator") -> list[int]:
        """A load of these partitions waits until released (at start, or after `reload`)."""
        return self.admin.request("POST", f"/{of}/hold-load", {"partitions": list(partitions)})["held"]

    def release_load(self, partitions=None, of: str = "coordinator") -> list[int]:
        body = {} if partitions is None else {"partitions": list(partitions)}
        return self.admin.request("POST", f"/{of}/release-load", body)["held"]

    def reload(self, of: str = "coordinator") -> int:
        """Every partition of the coordinator's topic loads again, in order, as after a restart."""
        return self.admin.request("POST", f"/{of}/reload", {})["partitions"]

    def fail_offsets_writes(self, count: int = 1) -> int:
        """The next `count` writes to __consumer_offsets fail."""
        return self.admin.request("POST", "/coordinator/fail-offsets-writes", {"count": count})["failing"]

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

    @property
    def bootstrap(self) -> str:  # tests.support's name for it
        return self.bootstrap_servers

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<kcoord {self.bootstrap_servers} data={self.data_dir} {'running' if self.running else 'stopped'}>"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "?"
