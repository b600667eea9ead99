"""Consumers in their own processes, for the group integration tests (bounded waits:
kcoord.testkit.waiting.wait_until).

Every consumer process reports JSON events on stdout (tests/broker/groups/workers/consumer.py and
tests/js/group_consumer.js share the format); kcat is adapted by its own line parsers.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from tests.security import client_settings

ROOT = pathlib.Path(__file__).resolve().parents[3]
WORKER = pathlib.Path(__file__).resolve().parent / "workers" / "consumer.py"
JS_DIR = ROOT / "tests" / "js"
KAFKAJS_PRESENT = (JS_DIR / "node_modules" / "kafkajs").is_dir()
KCAT = shutil.which("kcat") or shutil.which("kafkacat")
NODE = shutil.which("node")


def _json_line(line: str) -> dict | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


_KCAT_ASSIGNED = re.compile(r"rebalanced .*: assigned: (.*)$")
_KCAT_PARTITION = re.compile(r"\[(\d+)\]")


def _kcat_stderr_line(line: str) -> dict | None:
    """kcat -G logs '% Group g rebalanced (memberid ...): assigned: t [0], t [3]' on stderr."""
    match = _KCAT_ASSIGNED.search(line)
    if match:
        return {"ev": "assigned", "partitions": sorted(int(p) for p in _KCAT_PARTITION.findall(match.group(1)))}
    if "rebalanced" in line and "revoked" in line:
        return {"ev": "revoked"}
    return None


class ConsumerProcess:
    def __init__(self, argv: list[str], name: str, stderr_parser: Callable[[str], dict | None] | None = None,
                 cwd: pathlib.Path | None = None) -> None:
        self.name = name
        self.events: list[dict] = []
        self.stderr_lines: list[str] = []
        self._lock = threading.Lock()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)]), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=str(cwd or ROOT), env=env)
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, _json_line, False), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, stderr_parser, True), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream, parser, is_stderr: bool) -> None:
        for line in stream:
            line = line.rstrip("\n")
            if is_stderr:
                with self._lock:
                    self.stderr_lines.append(line)
            event = parser(line) if parser else None
            if event is not None:
                event["_t"] = time.monotonic()  # when it was read: just after the client did it
                with self._lock:
                    self.events.append(event)

    # -------------------------------------------------------------- what it reported
    def _of(self, kind: str) -> list[dict]:
        with self._lock:
            return [e for e in self.events if e.get("ev") == kind]

    @property
    def assignment(self) -> list[int] | None:
        """The latest assignment reported (None before the first)."""
        assigned = self._of("assigned")
        return assigned[-1]["partitions"] if assigned else None

    @property
    def assignment_count(self) -> int:
        return len(self._of("assigned"))

    def records(self) -> list[tuple[int, int, str | None]]:
        return [(e["p"], e["o"], e.get("k")) for e in self._of("rec")]

    def records_at(self) -> list[tuple[float, int, int]]:
        """(time read, partition, offset) of every record consumed (time.monotonic())."""
        return [(e["_t"], e["p"], e["o"]) for e in self._of("rec")]

    def commits_at(self) -> list[tuple[float, int, int]]:
        """(time read, partition, next offset) of every commit the client saw acknowledged."""
        return [(e["_t"], int(p), o) for e in self._of("committed") for p, o in e["offsets"].items()]

    def committed(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for e in self._of("committed"):
            out.update({int(p): o for p, o in e["offsets"].items()})
        return out

    def errors(self) -> list[str]:
        return [e["error"] for e in self._of("error")]

    # -------------------------------------------------------------- lifecycle
    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self, timeout: float = 30) -> int:
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.alive:
            self.proc.kill()
        self.proc.wait(10)

    def describe(self) -> str:
        with self._lock:
            tail = "\n".join(self.stderr_lines[-15:])
        return f"{self.name} (rc={self.proc.poll()}): stderr tail:\n{tail}"


def python_consumer(client: str, bootstrap: str, group: str, topic: str, name: str,
                    assignor: str = "roundrobin", session_timeout_ms: int = 6000,
                    instance_id: str | None = None, security: dict | None = None, group_protocol: str = "classic",
                    remote_assignor: str | None = None, max_seconds: float = 150.0) -> ConsumerProcess:
    argv = [sys.executable, str(WORKER), "--client", client, "--bootstrap", bootstrap, "--group", group,
            "--topic", topic, "--client-id", name, "--assignor", assignor,
            "--session-timeout-ms", str(session_timeout_ms), "--group-protocol", group_protocol,
            "--max-seconds", str(max_seconds)]
    if remote_assignor:
        argv += ["--remote-assignor", remote_assignor]
    if instance_id:
        argv += ["--instance-id", instance_id]
    if security:
        argv += ["--security", json.dumps(security)]
    return ConsumerProcess(argv, name)


def kafkajs_consumer(bootstrap: str, group: str, topic: str, name: str,
                     security: dict | None = None) -> ConsumerProcess:
    return ConsumerProcess([NODE, "group_consumer.js", bootstrap, group, topic, name, "150", json.dumps(security)],
                           name, cwd=JS_DIR)


PLATFORMATIC_PRESENT = (JS_DIR / "node_modules" / "@platformatic" / "kafka").is_dir()


def platformatic_consumer(bootstrap: str, group: str, topic: str, name: str, max_seconds: int = 150
                          ) -> ConsumerProcess:
    """@platformatic/kafka with groupProtocol 'consumer' (KIP-848), tests/js/kip848_consumer.mjs."""
    return ConsumerProcess([NODE, "kip848_consumer.mjs", bootstrap, group, topic, name, str(max_seconds)], name,
                           cwd=JS_DIR)


def kcat_consumer(bootstrap: str, group: str, topic: str, name: str, security: dict | None = None) -> ConsumerProcess:
    fmt = '{"ev":"rec","p":%p,"o":%o,"k":"%k"}\\n'
    argv = [KCAT, "-u", "-b", bootstrap, "-G", group, "-f", fmt, "-X", f"client.id={name}",
            "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000",
            "-X", "heartbeat.interval.ms=1500", "-X", "topic.metadata.refresh.interval.ms=1000",
            *client_settings.kcat(security), topic]
    return ConsumerProcess(argv, name, stderr_parser=_kcat_stderr_line)


def disjoint_cover(assignments: list[list[int] | None], partitions: int) -> bool:
    """Every consumer has reported, no partition twice, every partition once."""
    if any(a is None for a in assignments):
        return False
    flat = [p for a in assignments for p in a]
    return sorted(flat) == list(range(partitions))


def committed_max(consumers: list[ConsumerProcess]) -> dict[int, int]:
    """The highest offset committed per partition by any of `consumers` (partitions move between them)."""
    out: dict[int, int] = {}
    for c in consumers:
        for p, o in c.committed().items():
            out[p] = max(out.get(p, 0), o)
    return out


def stop_all(consumers: list[ConsumerProcess], timeout: float = 30) -> None:
    """SIGTERM every consumer at once (closing one by one would make the rest rebalance each time)."""
    for c in consumers:
        if c.alive:
            c.proc.send_signal(signal.SIGTERM)
    for c in consumers:
        try:
            c.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            c.kill()
