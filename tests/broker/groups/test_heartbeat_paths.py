"""A Heartbeat is answered from its frame (broker/apis/heartbeat.serve_frame) unless something needs
the general path (hooks, a queued request before it, an unusual frame). Over real TCP, both paths
give the same answer in every case, and the frame path keeps the server's order and metrics."""
from __future__ import annotations

import asyncio
import select

import pytest

from kcoord.broker.apis import heartbeat as heartbeat_api
from kcoord.broker.app import Broker
from kcoord.broker.registry import version_range
from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from tests.broker.groups.rawgroup import subscription

HEARTBEAT = 12
GROUP = "paths"


def join_and_sync(client: KafkaWireClient, group: str, instance_id: str | None = None) -> tuple[str, int]:
    """One member forms `group` alone (JoinGroup v9: MEMBER_ID_REQUIRED first); its (member id, generation)."""
    member_id = ""
    for _ in range(2):
        resp = client.request(m.JoinGroupRequest(
            group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member_id,
            group_instance_id=instance_id, protocol_type="consumer", reason=None,
            protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription())]), 9)
        member_id = resp.member_id
        if resp.error_code == E.NONE:
            break
        assert resp.error_code == E.MEMBER_ID_REQUIRED
    sync = client.request(m.SyncGroupRequest(
        group_id=group, generation_id=resp.generation_id, member_id=member_id, group_instance_id=instance_id,
        protocol_type="consumer", protocol_name="range",
        assignments=[m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=b"")]), 5)
    assert sync.error_code == E.NONE
    return member_id, resp.generation_id


def cases(member_id: str, generation: int, static_member_id: str) -> list[tuple[str, m.HeartbeatRequest, int]]:
    """(what, request, lowest version it applies to)."""
    hb = m.HeartbeatRequest
    return [
        ("alive", hb(group_id=GROUP, generation_id=generation, member_id=member_id), 0),
        ("old generation", hb(group_id=GROUP, generation_id=generation - 1, member_id=member_id), 0),
        ("unknown member", hb(group_id=GROUP, generation_id=generation, member_id="nobody"), 0),
        ("unknown group", hb(group_id="no-such-group", generation_id=1, member_id=member_id), 0),
        ("empty group id", hb(group_id="", generation_id=generation, member_id=member_id), 0),
        ("long member id", hb(group_id=GROUP, generation_id=generation, member_id="x" * 300), 0),
        ("static member", hb(group_id=GROUP + "-static", generation_id=1, member_id=static_member_id,
                             group_instance_id="instance-1"), 3),
        ("fenced static member", hb(group_id=GROUP + "-static", generation_id=1, member_id="old-incarnation",
                                    group_instance_id="instance-1"), 3),
    ]


def answers(port: int, member_id: str, generation: int, static_member_id: str) -> dict:
    out = {}
    with KafkaWireClient.connect(f"127.0.0.1:{port}", client_id="paths") as client:
        for what, request, first in cases(member_id, generation, static_member_id):
            for version in range(first, version_range(HEARTBEAT)[1] + 1):
                out[what, version] = client.request(request, version)
    return out


@pytest.fixture
async def formed(kcoord_broker: Broker):
    await asyncio.wait_for(kcoord_broker.group_coordinator.loaded_event.wait(), 30)
    port = kcoord_broker.listeners[0].port
    client = await asyncio.to_thread(KafkaWireClient.connect, f"127.0.0.1:{port}", 30, "member")
    static = await asyncio.to_thread(KafkaWireClient.connect, f"127.0.0.1:{port}", 30, "static")
    member_id, generation = await asyncio.to_thread(join_and_sync, client, GROUP)
    static_id, _ = await asyncio.to_thread(join_and_sync, static, GROUP + "-static", "instance-1")
    yield kcoord_broker, port, member_id, generation, static_id
    client.close()
    static.close()


async def test_frame_path_and_general_path_answer_alike(formed, monkeypatch):
    broker, port, member_id, generation, static_id = formed
    frames_read = []
    real_read = heartbeat_api.reader.read
    monkeypatch.setattr(heartbeat_api.reader, "read", lambda frame: frames_read.append(frame) or real_read(frame))

    fast = await asyncio.to_thread(answers, port, member_id, generation, static_id)
    assert len(frames_read) == len(fast)  # every heartbeat went to the frame handler first

    seen = []
    broker.hooks.after(HEARTBEAT, lambda ctx, req, resp: seen.append(ctx.api_version))  # forces the general path
    frames_read.clear()
    general = await asyncio.to_thread(answers, port, member_id, generation, static_id)
    assert frames_read == [] and len(seen) == len(general)

    assert fast == general
    expected = {"alive": E.NONE, "old generation": E.ILLEGAL_GENERATION, "unknown member": E.UNKNOWN_MEMBER_ID,
                "unknown group": E.UNKNOWN_MEMBER_ID, "empty group id": E.INVALID_GROUP_ID,
                "long member id": E.UNKNOWN_MEMBER_ID, "static member": E.NONE,
                "fenced static member": E.FENCED_INSTANCE_ID}
    assert {(what, v): r.error_code for (what, v), r in fast.items()} == {
        (what, v): expected[what] for what, v in fast}


async def test_a_rebalance_is_announced_on_the_frame_path(formed):
    broker, port, member_id, generation, _ = formed

    def rejoin_announced() -> int:
        newcomer = KafkaWireClient.connect(f"127.0.0.1:{port}", client_id="newcomer")
        # a new member joins with its id: the group goes to PreparingRebalance and parks the join
        resp = newcomer.request(m.JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
            protocol_type="consumer", reason=None,
            protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription())]), 9)
        assert resp.error_code == E.MEMBER_ID_REQUIRED
        newcomer.send(m.JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=resp.member_id,
            protocol_type="consumer", reason=None,
            protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription())]), 9)
        with KafkaWireClient.connect(f"127.0.0.1:{port}", client_id="old") as old:
            for _ in range(200):
                error = old.request(m.HeartbeatRequest(group_id=GROUP, generation_id=generation,
                                                       member_id=member_id), 4).error_code
                if error != E.NONE:
                    break
        newcomer.close()
        return error

    assert await asyncio.to_thread(rejoin_announced) == E.REBALANCE_IN_PROGRESS


def join_request(group: str, member_id: str) -> m.JoinGroupRequest:
    return m.JoinGroupRequest(
        group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=member_id,
        protocol_type="consumer", reason=None,
        protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription())])


async def test_a_heartbeat_behind_a_parked_join_waits_its_turn(formed):
    """Answers stay in request order: a heartbeat pipelined behind a JoinGroup that the coordinator parks
    is answered after that JoinGroup, though its own answer is ready at once."""
    broker, port, member_id, generation, _ = formed

    def pipelined() -> tuple[int, int, bool]:
        address = f"127.0.0.1:{port}"
        with KafkaWireClient.connect(address, client_id="stable") as stable, \
                KafkaWireClient.connect(address, client_id="newcomer") as c:
            stable_id, _ = join_and_sync(stable, "parked")
            newcomer_id = c.request(join_request("parked", ""), 9).member_id  # MEMBER_ID_REQUIRED
            c.send(join_request("parked", newcomer_id), 9)  # parked until the stable member rejoins
            c.send(m.HeartbeatRequest(group_id=GROUP, generation_id=generation, member_id=member_id), 4)
            answered_early = bool(select.select([c._sock], [], [], 0.5)[0])
            stable.send(join_request("parked", stable_id), 9)  # completes the rebalance
            join = c.receive()  # raises if the heartbeat's answer came first
            heartbeat = c.receive()
            stable.receive()
            return join.error_code, heartbeat.error_code, answered_early

    assert await asyncio.to_thread(pipelined) == (E.NONE, E.NONE, False)


async def test_frame_path_heartbeats_are_counted_in_metrics(formed):
    broker, port, member_id, generation, _ = formed

    def beat(n: int) -> None:
        with KafkaWireClient.connect(f"127.0.0.1:{port}", client_id="counted") as c:
            for _ in range(n):
                assert c.request(m.HeartbeatRequest(group_id=GROUP, generation_id=generation,
                                                     member_id=member_id), 4).error_code == E.NONE

    def count() -> float:
        for line in broker.metrics.render_prometheus().splitlines():
            if line.startswith('kcoord_requests_total{api="Heartbeat",error_code="0"}'):
                return float(line.split()[-1])
        return 0.0

    before = count()
    await asyncio.to_thread(beat, 25)
    assert count() - before == 25
    assert 'kcoord_request_seconds_count{api="Heartbeat"}' in broker.metrics.render_prometheus()
