"""kafka-python 3's exactly-once loop (kp_eos_worker.py) SIGKILLed mid-work and restarted with the same
transactional id: its InitProducerId fences the dead instance and aborts its open transaction
(TransactionCoordinator.handleInitProducerId); the group's offsets committed in transactions resume the
input exactly where the output stops, so a read_committed reader sees every input once."""
from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time

from tests.broker.transactions.test_exactly_once_confluent import (
    _create,
    _produce_inputs,
    _read_all,
    _wait_committed,
    _wait_group_caught_up,
)

WORKER = os.path.join(os.path.dirname(__file__), "kp_eos_worker.py")
INPUTS = 2_000


def _start(bootstrap: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, WORKER, bootstrap, "in", "out", "eos", "kp-eos-1", "100"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_kafka_python_loop_survives_sigkill_exactly_once(kcoord_server_factory):
    server = kcoord_server_factory({"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"})
    bootstrap = server.bootstrap
    _create(bootstrap, "in", "out")
    _produce_inputs(bootstrap, "in", INPUTS)
    worker = _start(bootstrap)
    _wait_committed(worker, 600)
    time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    worker = _start(bootstrap)
    try:
        ends = _wait_group_caught_up(bootstrap, "eos", "in")
    finally:
        worker.kill()
        worker.wait(10)
    assert sum(ends) == INPUTS
    counts = collections.Counter(_read_all(bootstrap, "out", "read_committed", INPUTS))
    assert sorted(counts) == sorted(b"v%d!" % i for i in range(INPUTS))
    assert max(counts.values()) == 1
