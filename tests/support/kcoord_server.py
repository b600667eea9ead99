"""Start the REAL kcoord server as a subprocess, for integration tests and tools.

    with KcoordServer(tmp_path) as srv:          # binds 127.0.0.1 on an ephemeral port
        KafkaProducer(bootstrap_servers=srv.bootstrap) ...
        srv.restart()                             # same data dir, same port
        assert "kcoord stopped" in srv.log_text()

kcoord.testkit.broker_process.BrokerProcess (what the pytest plugin runs) with Kafka's defaults rather than its
test settings, no admin endpoint unless the overrides ask for one, a fresh interpreter per start, and
`kill()` that only kills. The server's stdout and stderr go to `log_path`; `start` returns once the
server printed its ready line. Every wait is bounded.
"""
from __future__ import annotations

import os
import pathlib
import subprocess

from kcoord.testkit.broker_process import BrokerFailed, BrokerProcess

ROOT = pathlib.Path(__file__).resolve().parents[2]
ServerFailed = BrokerFailed


class KcoordServer(BrokerProcess):
    def __init__(self, workdir: str | os.PathLike, overrides: dict[str, str] | None = None,
                 name: str = "kcoord", log_level: str = "INFO") -> None:
        super().__init__(workdir, overrides, name=name, log_level=log_level, test_settings=False, admin=False)

    def kill(self, restart: bool = False, timeout: float = 30.0) -> None:  # type: ignore[override]
        """SIGKILL: no shutdown at all, as in a crash (BrokerProcess.start calls it with restart=False
        when a start fails)."""
        super().kill(restart=False, timeout=timeout)

    @property
    def proc(self) -> subprocess.Popen | None:
        return self._popen
