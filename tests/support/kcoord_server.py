"""A plain `kcoord serve` process (`python -m kcoord.tools serve`, a fresh interpreter), for the few tests
whose subject is that process rather than a broker: its exit status after SIGTERM / SIGINT, a
configuration or start-up error that must stop it, or an environment switch (KCOORD_TEST_*) it reads
at start. Every other test gets its broker from the launcher-backed fixtures (tests/support/fixtures.py).

    with KcoordServer(tmp_path) as srv:          # binds 127.0.0.1 on an ephemeral port
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(20) == 0

kcoord.testkit.broker_process.BrokerProcess without a launcher, with Kafka's defaults rather than the
kit's test settings, no admin endpoint unless the overrides ask for one, and `kill()` that only kills.
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
