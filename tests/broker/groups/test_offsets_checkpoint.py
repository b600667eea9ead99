"""The real server restarted (SIGTERM, SIGKILL) serves exactly the committed offsets when it loads
__consumer_offsets from checkpoints plus the log after them (issue 5), and ignores a corrupt
checkpoint (full replay, same offsets)."""
from __future__ import annotations

import re
import signal

import pytest

from kcoord.coordinator.checkpoint_store import CHECKPOINT_FILE
from kcoord.coordinator.runtime import CHECKPOINT_RECORDS_ENV
from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from kcoord.testkit.waiting import wait_until
from tests.broker.groups.group_server import start_group_server

TOPIC = "ckpt"
PARTITIONS = 4
LOADED = re.compile(r"loaded \d+ __consumer_offsets partitions \((\d+) from checkpoints; (\d+) records replayed\)")


@pytest.fixture
def often_checkpointing_server(tmp_path):
    """A server that checkpoints a partition after every 2 durable records."""
    srv = start_group_server(tmp_path, name="often", env={CHECKPOINT_RECORDS_ENV: "2"})
    yield srv
    srv.stop()


def _commit(client: KafkaWireClient, group: str, offsets: dict[int, int]) -> None:
    topic_type = m.OffsetCommitRequest.OffsetCommitRequestTopic
    request = m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
        topics=[topic_type(name=TOPIC, partitions=[topic_type.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata=f"m{o}")
            for p, o in offsets.items()])])
    response = client.request(request, 8)
    assert {p.error_code for t in response.topics for p in t.partitions} == {E.NONE}


def _commit_all(server, commits: dict[str, dict[int, int]], expected: dict[str, dict[int, int]]) -> None:
    with KafkaWireClient.connect(server.bootstrap) as client:
        for group, offsets in commits.items():
            _commit(client, group, offsets)
            expected.setdefault(group, {}).update(offsets)


def _last_load(server, lives: int) -> tuple[int, int]:
    """(partitions loaded from checkpoints, records replayed) of the `lives`-th start."""
    found = wait_until(lambda: len(LOADED.findall(server.log_text())) >= lives and LOADED.findall(server.log_text()),
                       30, f"load line of start {lives}\n{server.log_text()}")
    return tuple(map(int, found[lives - 1]))


def _assert_serves(server, expected: dict[str, dict[int, int]]) -> None:
    for group, offsets in expected.items():
        assert server.committed_offsets(group, TOPIC, PARTITIONS) == offsets, group


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_restart_from_checkpoints_serves_exactly_the_committed_offsets(restartable_server, sig):
    server = restartable_server
    server.create_topic(TOPIC, PARTITIONS)
    expected: dict[str, dict[int, int]] = {}
    _commit_all(server, {f"ck-{i}": {p: 10 * i + p for p in range(PARTITIONS)} for i in range(6)}, expected)
    _commit_all(server, {"ck-0": {1: 99}, "ck-3": {0: 7, 2: 8}}, expected)
    assert _last_load(server, 1) == (0, 0)

    server.restart(signal.SIGTERM)  # the clean shutdown checkpoints every partition written to
    from_checkpoints, replayed = _last_load(server, 2)
    assert from_checkpoints >= 1 and replayed == 0
    _assert_serves(server, expected)

    _commit_all(server, {"ck-1": {3: 1234}, "ck-new": {0: 1, 1: 2}, "ck-5": {0: 55}}, expected)
    server.restart(sig)
    from_checkpoints, replayed = _last_load(server, 3)
    # After SIGKILL only the log after the checkpoints is replayed: the 4 offsets committed above.
    assert (from_checkpoints >= 1, replayed) == (True, 0 if sig == signal.SIGTERM else 4)
    _assert_serves(server, expected)


def test_corrupt_checkpoint_is_ignored_and_the_log_replayed(restartable_server):
    server = restartable_server
    server.create_topic(TOPIC, PARTITIONS)
    expected: dict[str, dict[int, int]] = {}
    _commit_all(server, {f"cc-{i}": {p: i + p for p in range(PARTITIONS)} for i in range(4)}, expected)
    server.stop()
    checkpoints = sorted(server.data_dir.glob(f"__consumer_offsets-*/{CHECKPOINT_FILE}"))
    assert checkpoints
    for path in checkpoints:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    server.start()
    assert _last_load(server, 2) == (0, 4 * PARTITIONS)  # every commit record replayed
    assert server.log_text().count("ignoring checkpoint") == len(checkpoints)
    assert "CRC mismatch" in server.log_text()
    _assert_serves(server, expected)


def test_checkpoints_written_while_serving_survive_a_crash(often_checkpointing_server):
    server = often_checkpointing_server
    server.create_topic(TOPIC, PARTITIONS)
    expected: dict[str, dict[int, int]] = {}
    _commit_all(server, {"cw-0": {p: p + 1 for p in range(PARTITIONS)}}, expected)
    wait_until(lambda: list(server.data_dir.glob(f"__consumer_offsets-*/{CHECKPOINT_FILE}")), 30,
               "a checkpoint written after 2 records")
    _commit_all(server, {"cw-0": {0: 100}}, expected)
    server.restart(signal.SIGKILL)  # no shutdown: only checkpoints written while serving exist
    from_checkpoints, replayed = _last_load(server, 2)
    assert from_checkpoints == 1 and replayed <= 1
    _assert_serves(server, expected)
