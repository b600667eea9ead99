"""An OffsetCommit is answered from its frame (broker/apis/offset_commit.serve_frame), later, once
durable, through a future the connection waits on, unless something needs the general path (hooks, a
queued request before it, an unusual frame). Over real TCP, both paths give the same bytes in every
case, and the frame path keeps the server's order, its pending commits and its shutdown drain."""
from __future__ import annotations

import asyncio
import select
import uuid

import pytest

from kcoord.broker.apis import offset_commit as offset_commit_api
from kcoord.broker.app import Broker
from kcoord.broker.config import BrokerConfig
from kcoord.broker.registry import version_range
from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.headers import encode_request_frame
from kcoord.testkit.broker_process import TEST_SETTINGS
from tests.broker.groups.test_heartbeat_paths import join_and_sync, join_request
from tests.support.raw_kafka import RawKafka

OFFSET_COMMIT, HEARTBEAT, METADATA = 8, 12, 3
VERSIONS = range(version_range(OFFSET_COMMIT)[0], version_range(OFFSET_COMMIT)[1] + 1)
TOPIC = "t"
NOPE_ID = uuid.UUID(int=0xABC)  # v10 names topics by id: "nope" has this one, which no topic has
Topic = m.OffsetCommitRequest.OffsetCommitRequestTopic
Partition = Topic.OffsetCommitRequestPartition


def commit(group: str, generation: int = -1, member_id: str = "", topics=((TOPIC, (0, 1, 2)),),
           metadata: str | None = "", instance: str | None = None, retention: int = -1) -> m.OffsetCommitRequest:
    """(Fields a version does not have are left out by the encoder.)"""
    return m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=instance,
        retention_time_ms=retention,
        topics=[Topic(name=name, partitions=[
            Partition(partition_index=i, committed_offset=100 + i, committed_leader_epoch=i % 2,
                      committed_metadata=metadata) for i in indices]) for name, indices in topics])


def frame_of(api_key: int, version: int, correlation_id: int, request) -> bytes:
    body = m.request_codec(api_key, version).encode(request)
    return encode_request_frame(api_key, version, correlation_id, "paths", body)


class WriteFault:
    """From a test's thread: the broker's next __consumer_offsets write fails (GroupRuntime.fail_offsets_writes,
    what the admin endpoint's /coordinator/fail-offsets-writes calls), armed on the loop before it returns."""

    def __init__(self, broker: Broker, loop: asyncio.AbstractEventLoop) -> None:
        self.broker, self.loop = broker, loop

    def arm(self) -> None:
        async def arm() -> None:
            self.broker.group_coordinator.fail_offsets_writes(1)
        asyncio.run_coroutine_threadsafe(arm(), self.loop).result(10)

    def pending(self) -> int:
        return self.broker.group_coordinator.fail_offsets_writes(0)


@pytest.fixture
async def served(tmp_path):
    """An in-process broker whose coordinator writes can be made to fail (WriteFault), with topic `t`
    (3 partitions), a stable group, a static member's group and a group that is completing its rebalance."""
    broker = Broker(BrokerConfig.load(overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"), **TEST_SETTINGS}))
    await broker.start()
    await asyncio.wait_for(broker.group_coordinator.loaded_event.wait(), 30)
    broker.topics.create(TOPIC, 3)
    port = broker.listeners[0].port
    stable = await asyncio.to_thread(KafkaWireClient.connect, f"127.0.0.1:{port}", 30, "stable")
    member_id, generation = await asyncio.to_thread(join_and_sync, stable, "stable")
    await asyncio.to_thread(join_and_sync, stable, "static", "instance-1")

    def join_only() -> tuple[str, int]:  # joined, never synced: the group stays in CompletingRebalance
        with KafkaWireClient.connect(f"127.0.0.1:{port}", client_id="completing") as c:
            first = c.request(join_request("completing", ""), 9)
            joined = c.request(join_request("completing", first.member_id), 9)
            assert joined.error_code == E.NONE
            return joined.member_id, joined.generation_id

    completing = await asyncio.to_thread(join_only)
    fault = WriteFault(broker, asyncio.get_running_loop())
    yield broker, port, fault, (member_id, generation), completing
    stable.close()
    await broker.stop(timeout=5.0)


def cases(stable: tuple[str, int], completing: tuple[str, int]) -> list[tuple[str, m.OffsetCommitRequest]]:
    member_id, generation = stable
    return [
        ("stored", commit("simple")),
        ("stored, null metadata", commit("simple", metadata=None)),
        ("no topics", commit("simple", topics=())),
        ("unknown topic", commit("simple", topics=(("nope", (0, 1)),))),
        ("unknown partition", commit("simple", topics=((TOPIC, (0, 7, -1)),))),
        ("mixed", commit("simple", topics=((TOPIC, (2, 9)), ("nope", (0,)), (TOPIC, (1,))))),
        ("member", commit("stable", generation, member_id)),
        ("unknown member", commit("stable", generation, "nobody")),
        ("illegal generation", commit("stable", generation + 5, member_id)),
        ("fenced instance", commit("static", 1, "another-incarnation", instance="instance-1")),
        ("with retention", commit("simple", retention=3_600_000)),
        ("no such group", commit("ghost", 3, "m")),
        ("rebalance in progress", commit("completing", completing[1], completing[0])),
        ("empty group id", commit("")),
        ("failed write", commit("simple")),
        ("metadata with text", commit("simple", metadata="why")),  # the frame reader declines it
    ]


EXPECTED = {  # case -> every partition's code, or {(topic, partition): code}, or {version: code}
    "stored": E.NONE, "stored, null metadata": E.NONE, "no topics": E.NONE,
    # from v10 a topic is named by its id: an id no topic has is UNKNOWN_TOPIC_ID (KafkaApis.handleOffsetCommitRequest)
    "unknown topic": {v: E.UNKNOWN_TOPIC_ID if v >= 10 else E.UNKNOWN_TOPIC_OR_PARTITION for v in VERSIONS},
    "unknown partition": {("t", 0): E.NONE, ("t", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
                          ("t", -1): E.UNKNOWN_TOPIC_OR_PARTITION},
    "mixed": {("t", 2): E.NONE, ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
              ("t", 1): E.NONE},
    "member": E.NONE, "unknown member": E.UNKNOWN_MEMBER_ID, "illegal generation": E.ILLEGAL_GENERATION,
    "fenced instance": {v: E.FENCED_INSTANCE_ID if v >= 7 else E.UNKNOWN_MEMBER_ID for v in VERSIONS},
    "with retention": E.NONE,
    "no such group": {v: E.GROUP_ID_NOT_FOUND if v >= 9 else E.ILLEGAL_GENERATION for v in VERSIONS},
    # Kafka 4 stores commits for the empty group id ("for backwards compatibility": only a null one is
    # INVALID_GROUP_ID; GroupCoordinatorService.commitOffsets).
    "rebalance in progress": E.REBALANCE_IN_PROGRESS, "empty group id": E.NONE,
    "metadata with text": E.NONE,
}


def by_id(request: m.OffsetCommitRequest, ids: dict[str, uuid.UUID]) -> m.OffsetCommitRequest:
    """The request's topics with their ids too (v10 sends only those)."""
    for t in request.topics:
        t.topic_id = ids[t.name]
    return request


def answers(port: int, fault: WriteFault, stable, completing, ids: dict[str, uuid.UUID]) -> dict[tuple[str, int], bytes]:
    """Every case at every version on one connection: the raw response frames."""
    out = {}
    with RawKafka(port, client_id="paths") as c:
        correlation_id = 0
        for what, request in cases(stable, completing):
            by_id(request, ids)
            for version in VERSIONS:
                if what == "failed write":
                    fault.arm()
                correlation_id += 1
                c.send_raw(frame_of(OFFSET_COMMIT, version, correlation_id, request))
                out[what, version] = c.read_frame()
        assert fault.pending() == 0
    return out


def codes(version: int, frame: bytes, ids: dict[str, uuid.UUID]) -> list[tuple[tuple[str, int], int]]:
    """((topic name, partition), error code) of every partition answered (v10 answers by id)."""
    header = 5 if version >= 8 else 4  # correlation id (and the header's tag section)
    response, _ = m.response_codec(OFFSET_COMMIT, version).decode(frame, header)
    names = {topic_id: name for name, topic_id in ids.items()}
    return [((t.name if version < 10 else names[t.topic_id], p.partition_index), p.error_code)
            for t in response.topics for p in t.partitions]


async def test_frame_path_and_general_path_answer_alike(served, monkeypatch):
    broker, port, fault, stable, completing = served
    taken = []
    real_read = offset_commit_api.reader.read
    monkeypatch.setattr(offset_commit_api.reader, "read",
                        lambda frame: taken.append(real_read(frame) is not None) or real_read(frame))
    ids = {TOPIC: broker.topics.get(TOPIC).topic_id, "nope": NOPE_ID}

    asked = []  # what the coordinator's front door was asked, but the callback
    real_commit = broker.group_coordinator.service.commit_offsets

    def recording(request, callback):
        asked.append(request)
        real_commit(request, callback)

    monkeypatch.setattr(broker.group_coordinator.service, "commit_offsets", recording)

    fast = await asyncio.to_thread(answers, port, fault, stable, completing, ids)
    asked_fast = list(asked)
    assert taken == [what != "metadata with text" for what, _ in cases(stable, completing) for _ in VERSIONS]

    seen = []
    broker.hooks.after(OFFSET_COMMIT, lambda ctx, req, resp: seen.append(ctx.api_version))  # the general path
    taken.clear()
    asked.clear()
    general = await asyncio.to_thread(answers, port, fault, stable, completing, ids)
    assert taken == [] and len(seen) == len(general)

    assert fast == general
    assert asked_fast == asked
    stored = [request.offsets[1] for request in asked[:len(VERSIONS)]]  # "stored", every version
    assert stored == [(TOPIC, 1, 101, 1 if v >= 6 else -1, "") for v in VERSIONS]
    retained = [request.retention_time_ms for request in asked if request.group_id == "simple"]
    assert set(retained) == {-1, 3_600_000}
    for (what, version), frame in fast.items():
        got = codes(version, frame, ids)
        expected = EXPECTED.get(what)
        if what == "mixed" and version >= 10:
            expected = {**expected, ("nope", 0): E.UNKNOWN_TOPIC_ID}
        if what == "failed write":
            assert {code for _, code in got} - {E.NONE}, "a failed write must not answer NONE"
        elif what == "no topics":
            assert got == []
        elif isinstance(expected, dict) and set(expected) == set(VERSIONS):
            assert {code for _, code in got} == {expected[version]}, what
        elif isinstance(expected, dict):
            assert dict(got) == expected, what
        else:
            assert {code for _, code in got} == {expected}, what


class HeldCommits:
    """The coordinator's commits, with each answer held back until `release` (later ones pass)."""

    def __init__(self, broker: Broker, monkeypatch) -> None:
        self.held: list = []
        self.holding = True
        real = broker.group_coordinator.service.commit_offsets

        def holding(request, callback):
            if self.holding:
                callback = lambda result, answer=callback: self.held.append((answer, result))  # noqa: E731
            real(request, callback)

        monkeypatch.setattr(broker.group_coordinator.service, "commit_offsets", holding)

    async def wait(self) -> None:
        for _ in range(500):
            if self.held:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("no commit reached the coordinator")

    def release(self) -> None:
        self.holding = False
        for callback, result in self.held:
            callback(result)
        self.held.clear()


def readable(sock, timeout: float) -> bool:
    return bool(select.select([sock], [], [], timeout)[0])


async def test_requests_behind_a_pending_commit_are_answered_in_order(served, monkeypatch):
    """A heartbeat and a metadata request sent while a frame-path commit waits for its write are answered
    after it, in order, though their own answers are ready at once."""
    broker, port, _fault, (member_id, generation), _ = served
    taken = []
    real_read = offset_commit_api.reader.read
    monkeypatch.setattr(offset_commit_api.reader, "read",
                        lambda frame: taken.append(real_read(frame) is not None) or real_read(frame))
    held = HeldCommits(broker, monkeypatch)
    c = await asyncio.to_thread(RawKafka, port)
    try:
        await asyncio.to_thread(c.send_raw, frame_of(OFFSET_COMMIT, 8, 1, commit("simple")))
        await held.wait()
        assert taken == [True]
        heartbeat = m.HeartbeatRequest(group_id="stable", generation_id=generation, member_id=member_id)
        await asyncio.to_thread(c.send_raw, frame_of(HEARTBEAT, 4, 2, heartbeat))
        await asyncio.to_thread(c.send_raw, frame_of(METADATA, 9, 3, m.MetadataRequest(topics=None)))
        assert not await asyncio.to_thread(readable, c.sock, 0.3)
        held.release()
        order = await asyncio.to_thread(
            lambda: [c.read_response(OFFSET_COMMIT, 8), c.read_response(HEARTBEAT, 4), c.read_response(METADATA, 9)])
    finally:
        c.close()
    assert [cid for cid, _ in order] == [1, 2, 3]
    assert {p.error_code for t in order[0][1].topics for p in t.partitions} == {E.NONE}
    assert order[1][1].error_code == E.NONE
    assert TOPIC in {t.name for t in order[2][1].topics}


async def test_a_commit_pending_when_its_connection_closes_is_still_stored(served, monkeypatch, caplog):
    broker, port, _fault, _, _ = served
    held = HeldCommits(broker, monkeypatch)
    c = await asyncio.to_thread(RawKafka, port)
    await asyncio.to_thread(c.send_raw, frame_of(OFFSET_COMMIT, 9, 1, commit("orphan")))
    await held.wait()
    open_before = len(broker.server.connections)
    c.close()
    for _ in range(500):
        if len(broker.server.connections) < open_before:
            break
        await asyncio.sleep(0.01)
    assert len(broker.server.connections) == open_before - 1
    held.release()
    await asyncio.sleep(0.05)  # the answer, dropped
    assert "error while serving" not in caplog.text

    def commit_again() -> int:  # the server serves on
        with RawKafka(port) as again:
            return again.request(OFFSET_COMMIT, 8, commit("after")).topics[0].partitions[0].error_code

    assert await asyncio.to_thread(commit_again) == E.NONE
    fetched = broker.group_coordinator.fetch_offsets("orphan", None, False)
    assert sorted((t.topic, t.partition, t.offset) for t in fetched.partitions) == [
        (TOPIC, 0, 100), (TOPIC, 1, 101), (TOPIC, 2, 102)]


async def test_shutdown_waits_for_a_pending_commit_and_answers_it(served, monkeypatch):
    broker, port, _fault, _, _ = served
    held = HeldCommits(broker, monkeypatch)
    c = await asyncio.to_thread(RawKafka, port)
    try:
        await asyncio.to_thread(c.send_raw, frame_of(OFFSET_COMMIT, 8, 1, commit("draining")))
        await held.wait()
        stopping = asyncio.create_task(broker.stop(timeout=5.0))
        await asyncio.sleep(0.2)
        assert not stopping.done()  # the connection drains: its commit is not answered yet
        held.release()
        cid, response = await asyncio.to_thread(c.read_response, OFFSET_COMMIT, 8)
        await asyncio.wait_for(stopping, 5)
    finally:
        c.close()
    assert cid == 1
    assert {p.error_code for t in response.topics for p in t.partitions} == {E.NONE}


async def test_frame_path_commits_are_counted_in_metrics(served):
    broker, port, _fault, _, _ = served

    def count(name: str) -> float:
        for line in broker.metrics.render_prometheus().splitlines():
            if line.startswith(name):
                return float(line.split()[-1])
        return 0.0

    requests = 'kcoord_requests_total{api="OffsetCommit",error_code="0"}'
    latencies = "kcoord_offset_commit_seconds_count"
    before = count(requests), count(latencies)

    def commit_some(n: int) -> None:
        with RawKafka(port) as c:
            for _ in range(n):
                assert c.request(OFFSET_COMMIT, 8, commit("counted")).topics[0].partitions[0].error_code == E.NONE

    await asyncio.to_thread(commit_some, 7)
    assert (count(requests) - before[0], count(latencies) - before[1]) == (7, 7)
