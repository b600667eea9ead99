"""SIGKILL crash tests: every append acknowledged before the kill is on disk after recovery, also
while compaction rewrites segments underneath."""
import os
import pathlib
import random
import select
import signal
import subprocess
import sys
import time

import pytest

from kcoord.protocol.records import decode_records, iter_batches
from kcoord.storage import LogManager, PartitionLog
from kcoord.storage.manager import CLEAN_SHUTDOWN_FILE
from tests.storage.crash_appender import config

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHILD = pathlib.Path(__file__).with_name("crash_appender.py")


def run_until_killed(log_dir: str, run_id: str, rng: random.Random, compact: bool, mode: str = ""):
    """Start the appender, kill it at a random moment; return its start offset, the acks it
    printed ({offset: payload}) and how many compactions it reported finished."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)]))
    mode = "compact" if compact else mode
    args = [sys.executable, str(CHILD), log_dir, run_id] + ([mode] if mode else [])
    child = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, cwd=str(ROOT))
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
    acked, cleans = {}, 0
    for line in lines[1:]:
        first, second = line.split()
        if first == b"compacted":
            cleans = int(second)
        else:
            acked[int(first)] = bytes.fromhex(second.decode())
    return start, acked, cleans


def all_records(log: PartitionLog) -> dict[int, tuple[bytes, bytes]]:
    """offset -> (key, value) of everything the recovered log serves, CRC-checked."""
    out = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for _, header, batch in iter_batches(data, verify=True):
            for record in decode_records(batch):
                out[record.offset] = (record.key, record.value)
            offset = header.next_offset
    return out


def open_recovered(log_dir: str, compact: bool) -> PartitionLog:
    return PartitionLog(os.path.join(log_dir, "crash-0"), "crash", 0, config(compact))


@pytest.mark.timeout(120)
def test_acknowledged_appends_survive_sigkill(tmp_path):
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    log_dir = str(tmp_path)
    acked_total: dict[int, bytes] = {}
    for round_no in range(24):
        start, acked, _ = run_until_killed(log_dir, f"r{round_no}", rng, compact=False)
        log = open_recovered(log_dir, compact=False)
        try:
            on_disk = {offset: value for offset, (_, value) in all_records(log).items()}
            assert start >= (max(acked_total) + 1 if acked_total else 0)
            acked_total.update(acked)
            missing = {o: v for o, v in acked_total.items() if on_disk.get(o) != v}
            assert not missing, f"round {round_no}: {len(missing)} acknowledged appends lost or changed"
            assert log.log_end_offset >= max(acked_total, default=-1) + 1
        finally:
            log.close()
    assert len(acked_total) > 24


@pytest.mark.timeout(120)
async def test_acknowledged_appends_survive_sigkill_after_clean_starts(tmp_path):
    """Each round: a clean close (by the checker, as LogManager) leaves the marker; the appender's
    start deletes it (Kafka's loadLogs, KAFKA-10471) and rewrites the recovery-point checkpoint as
    it goes; a SIGKILL at any instant; the next open is unclean, recovers the segments from the
    checkpointed point on, trusts those before it, and holds every acknowledged append."""
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    log_dir = str(tmp_path)
    acked_total: dict[int, bytes] = {}
    trusted = 0
    for round_no in range(16):
        start, acked, _ = run_until_killed(log_dir, f"m{round_no}", rng, compact=False, mode="maintain")
        manager = LogManager(log_dir, config(False))
        try:
            assert not manager.had_clean_shutdown
            log = manager.get("crash", 0)
            trusted += log.loaded_trusted
            assert log.loaded_recovered >= 1  # at least the segment holding the recovery point
            on_disk = {offset: value for offset, (_, value) in all_records(log).items()}
            assert start >= (max(acked_total) + 1 if acked_total else 0)
            acked_total.update(acked)
            missing = {o: v for o, v in acked_total.items() if on_disk.get(o) != v}
            assert not missing, f"round {round_no}: {len(missing)} acknowledged appends lost or changed"
        finally:
            await manager.close()
        assert os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
    assert len(acked_total) > 16
    assert trusted > 0  # segments below a checkpointed recovery point were opened without a scan


def _sequence(payload: bytes) -> tuple[str, int]:
    run_id, _task, n = payload.split(b"/")[:3]
    return run_id.decode(), int(n)


@pytest.mark.timeout(120)
def test_acknowledged_state_survives_sigkill_during_compaction(tmp_path):
    """Each appender writes one key; after a kill, the recovered log's latest value for the key is
    the last acknowledged one or a later one from the same run — never older, never missing."""
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    log_dir = str(tmp_path)
    total_cleans = 0
    for round_no in range(10):
        run_id = f"c{round_no}"
        _, acked, cleans = run_until_killed(log_dir, run_id, rng, compact=True)
        total_cleans += cleans
        last_acked: dict[bytes, int] = {}
        for offset in sorted(acked):
            payload = acked[offset]
            last_acked[b"key" + payload.split(b"/")[1]] = _sequence(payload)[1]
        log = open_recovered(log_dir, compact=True)
        try:
            latest: dict[bytes, bytes] = {}
            for _, (key, value) in sorted(all_records(log).items()):
                latest[key] = value
            for key, n in last_acked.items():
                assert key in latest, f"round {round_no}: {key!r} lost"
                got_run, got_n = _sequence(latest[key])
                assert got_run == run_id and got_n >= n, f"round {round_no}: {key!r} went back to {latest[key]!r}"
            assert not [n for n in os.listdir(log.directory) if n.endswith(".cleaned")]
        finally:
            log.close()
    assert total_cleans > 0  # compaction really ran under the kills
