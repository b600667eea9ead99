"""A single-member etcd as a child process, for tests (and `kcoord cluster up` later).

    etcd = EtcdProcess(workdir).start()   # free loopback ports, data in workdir/etcd-data
    etcd.connect                          # "127.0.0.1:PORT": a kcoord.etcd.connect value (add /PREFIX)
    etcd.kill(); etcd.start()             # SIGKILL, then the same member again on its data and ports
    etcd.pause(); etcd.resume()           # SIGSTOP / SIGCONT
    etcd.stop()

Runs Debian's `etcd` (package etcd-server; scripts/ensure-test-tools.sh installs it) with fast raft
timings (heartbeat 50 ms, election 500 ms) so a restarted member leads again at once. `start()` returns
once the member answers /health. Standalone: no pytest, no kcoord imports beyond the launcher's
die-with-parent hook, so a fixture anywhere can use it.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from kcoord.testkit.launcher import _die_with_parent

INSTALL_HINT = "etcd is not installed (Debian: apt-get install etcd-server; make test does it)"


def etcd_binary() -> str | None:
    return shutil.which("etcd") or (("/usr/bin/etcd") if os.access("/usr/bin/etcd", os.X_OK) else None)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class EtcdFailed(RuntimeError):
    pass


class EtcdProcess:
    def __init__(self, workdir: str | os.PathLike, name: str = "etcd", host: str = "127.0.0.1",
                 start_timeout_s: float = 15.0) -> None:
        self.workdir = pathlib.Path(workdir)
        self.name = name
        self.host = host
        self.data_dir = self.workdir / f"{name}-data"
        self.log_path = self.workdir / f"{name}.log"
        self.start_timeout_s = start_timeout_s
        self.client_port = free_port(host)
        self.peer_port = free_port(host)
        self._proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def client_url(self) -> str:
        return f"http://{self.host}:{self.client_port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def argv(self) -> list[str]:
        binary = etcd_binary()
        if binary is None:
            raise EtcdFailed(INSTALL_HINT)
        peer_url = f"http://{self.host}:{self.peer_port}"
        return [binary, "--name", self.name, "--data-dir", str(self.data_dir),
                "--listen-client-urls", self.client_url, "--advertise-client-urls", self.client_url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"{self.name}={peer_url}", "--initial-cluster-state", "new",
                "--heartbeat-interval", "50", "--election-timeout", "500",
                "--logger", "zap", "--log-level", "warn"]

    def start(self) -> EtcdProcess:
        """Start the member (again, after kill or stop, on the same data and ports); wait until it answers."""
        if self._proc is not None and self._proc.poll() is None:
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + self.start_timeout_s
        while not self.healthy():
            if self._proc.poll() is not None:
                raise EtcdFailed(f"etcd exited with {self._proc.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                self.kill()
                raise EtcdFailed(f"etcd did not answer within {self.start_timeout_s} s; see {self.log_path}")
            time.sleep(0.05)
        return self

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.client_url + "/health", timeout=1) as reply:
                return json.load(reply).get("health") == "true"
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def kill(self) -> None:
        """SIGKILL; the data dir stays, so start() brings the same member back."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def pause(self) -> None:
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Kill it and remove its data."""
        if self._proc is not None:
            self.resume()
        self.kill()
        self._proc = None
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EtcdProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
