"""SIGKILL crash test: every append acknowledged before the kill is on disk after recovery."""
import os
import pathlib
import random
import select
import signal
import subprocess
import sys
import time

import pytest

from protocol.records import decode_records, iter_batches
from storage import LogConfig, PartitionLog

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHILD = pathlib.Path(__file__).with_name("crash_appender.py")
ROUNDS = 24


def run_until_killed(log_dir: str, run_id: str, rng: random.Random) -> tuple[int, dict[int, bytes]]:
    """Start the appender, kill it at a random moment; return its start offset and the acks it printed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen([sys.executable, str(CHILD), log_dir, run_id], stdout=subprocess.PIPE,
                             env=env, cwd=str(ROOT))
    out = b""
    try:
        kill_after_acks = rng.randint(1, 1500)
        deadline = time.monotonic() + 20  # a safety net only; the test does not time anything
        while out.count(b"\n") <= kill_after_acks and time.monotonic() < deadline:
            ready, _, _ = select.select([child.stdout], [], [], 1.0)
            if ready:
                chunk = os.read(child.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
        child.send_signal(signal.SIGKILL)
        out += child.stdout.read()
    finally:
        child.kill()
        child.wait()
    lines = out.split(b"\n")[:-1]  # a last line without newline was cut by the kill
    assert lines and lines[0].startswith(b"ready"), out[:200]
    start = int(lines[0].split()[1])
    acked = {}
    for line in lines[1:]:
        offset, payload = line.split()
        acked[int(offset)] = bytes.fromhex(payload.decode())
    return start, acked


def all_values(log: PartitionLog) -> dict[int, bytes]:
    out = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for _, header, batch in iter_batches(data, verify=True):
            for record in decode_records(batch):
                out[record.offset] = record.value
            offset = header.next_offset
    return out


@pytest.mark.timeout(120)
def test_acknowledged_appends_survive_sigkill(tmp_path):
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    log_dir = str(tmp_path)
    acked_total: dict[int, bytes] = {}
    for round_no in range(ROUNDS):
        start, acked = run_until_killed(log_dir, f"r{round_no}", rng)
        log = PartitionLog(os.path.join(log_dir, "crash-0"), "crash", 0, LogConfig(segment_bytes=32 * 1024))
        try:
            on_disk = all_values(log)
            assert start >= (max(acked_total) + 1 if acked_total else 0)
            acked_total.update(acked)
            missing = {o: v for o, v in acked_total.items() if on_disk.get(o) != v}
            assert not missing, f"round {round_no}: {len(missing)} acknowledged appends lost or changed"
            assert log.log_end_offset >= max(acked_total, default=-1) + 1
        finally:
            log.close()
    assert len(acked_total) > ROUNDS
