"""Fault specifications (broker/faults.py): parsing rejects bad input naming the field; the firing rule
(after, probability with a seed, count) is deterministic."""
from __future__ import annotations

import pytest

from kcoord.broker.faults import Fault, FaultError, FaultSpec, RequestFacts, request_facts
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

HEARTBEAT = m.API_KEYS["Heartbeat"]


def facts(group="g", client="c", member="m1", version=4):
    return RequestFacts(HEARTBEAT, version, client, (group,), (), (member,))


@pytest.mark.parametrize("raw, field", [
    ({"api": "Heartbeet", "error": "NOT_COORDINATOR"}, "api"),
    ({"api": 9999, "error": "NOT_COORDINATOR"}, "api"),
    ({"api": "Heartbeat", "error": "NO_SUCH_ERROR"}, "error"),
    ({"api": "Heartbeat", "error": "NONE"}, "error"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "count": -1}, "count"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "count": 0}, "count"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "after": -2}, "after"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "count": "3"}, "count"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "probability": 0}, "probability"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "probability": 1.5}, "probability"),
    ({"api": "Heartbeat", "action": "delay"}, "delay_ms"),
    ({"api": "Heartbeat", "action": "delay", "delay_ms": -5}, "delay_ms"),
    ({"api": "Heartbeat", "action": "explode"}, "action"),
    ({"api": "Heartbeat", "action": "close", "error": "NOT_COORDINATOR"}, "error"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "group": "g"}, "unknown field"),
    ({"api": "Heartbeat", "error": "NOT_COORDINATOR", "group_id": 5}, "group_id"),
    ({"error": "NOT_COORDINATOR"}, "api"),
    ([], "JSON object"),
])
def test_bad_specs_are_rejected_naming_the_field(raw, field):
    with pytest.raises(FaultError, match=field):
        FaultSpec.parse(raw)


def test_a_spec_reads_names_and_codes_alike():
    by_name = FaultSpec.parse({"api": "Heartbeat", "error": "rebalance_in_progress"})
    by_code = FaultSpec.parse({"api": 12, "error": 27})
    assert by_name == by_code
    assert by_name.action == "error" and by_name.error == ErrorCode.REBALANCE_IN_PROGRESS
    assert FaultSpec.parse(by_name.to_json()) == by_name  # what the endpoint lists can be sent back


def test_after_then_count():
    fault = Fault(1, FaultSpec.parse({"api": "Heartbeat", "error": 27, "after": 2, "count": 3}))
    assert [fault.decide(facts()) for _ in range(7)] == [False, False, True, True, True, False, False]
    assert (fault.matched, fault.fired, fault.exhausted) == (5, 3, True)


def test_matchers_narrow_what_counts():
    fault = Fault(1, FaultSpec.parse({"api": "Heartbeat", "error": 27, "group_id": "g", "client_id": "c",
                                      "member_id": "m1", "version": 4, "count": 1}))
    misses = [facts(group="other"), facts(client="x"), facts(member="m2"), facts(version=3),
              RequestFacts(m.API_KEYS["SyncGroup"], 4, "c", ("g",), (), ("m1",))]
    assert not any(fault.decide(f) for f in misses)
    assert fault.matched == 0  # a miss does not count towards `after`
    assert fault.decide(facts())


def test_probability_is_deterministic_for_a_seed():
    def run(seed):
        fault = Fault(1, FaultSpec.parse({"api": "Heartbeat", "error": 27, "probability": 0.3, "seed": seed}))
        return [fault.decide(facts()) for _ in range(200)]

    first = run(7)
    assert first == run(7)
    assert first != run(8)
    assert 30 < sum(first) < 90  # it is a probability, not all or nothing


def test_request_facts_find_groups_topics_members():
    req = m.OffsetCommitRequest(group_id="g", member_id="m1", topics=[
        m.OffsetCommitRequest.OffsetCommitRequestTopic(name="t1", partitions=[])])
    got = request_facts(8, 8, "cli", req)
    assert (got.group_ids, got.member_ids, got.topics, got.client_id) == (("g",), ("m1",), ("t1",), "cli")
    leave = m.LeaveGroupRequest(group_id="g", members=[m.LeaveGroupRequest.MemberIdentity(member_id="a"),
                                                        m.LeaveGroupRequest.MemberIdentity(member_id="b")])
    assert request_facts(13, 5, None, leave).member_ids == ("a", "b")
    assert request_facts(15, 5, None, m.DescribeGroupsRequest(groups=["x", "y"])).group_ids == ("x", "y")
    assert request_facts(10, 4, None, m.FindCoordinatorRequest(coordinator_keys=["g2"])).group_ids == ("g2",)


async def test_no_live_fault_means_no_hook_so_the_fast_paths_stay():
    """The server serves Heartbeat / OffsetCommit from their frames only while hooks.installed is 0
    (broker/server.py, KafkaConnection._serve_frame): an exhausted or cleared fault must leave none."""
    from types import SimpleNamespace

    from kcoord.broker.fault_injector import FaultInjector
    from kcoord.broker.hooks import Hooks
    from kcoord.observability.metrics import Metrics

    hooks = Hooks()
    injector = FaultInjector(hooks, Metrics())
    injector.add(FaultSpec.parse({"api": "Heartbeat", "error": 27, "count": 1}))
    injector.add(FaultSpec.parse({"api": "SyncGroup", "action": "delay", "delay_ms": 1}))
    assert hooks.installed == 2 and hooks.active(HEARTBEAT) and not hooks.active(m.API_KEYS["Fetch"])
    ctx = SimpleNamespace(api_key=HEARTBEAT, api_version=4, client_id="c", correlation_id=1,
                          client_host="127.0.0.1", client_port=1)
    answer = await hooks.run_before(ctx, m.HeartbeatRequest(group_id="g", member_id="m", generation_id=1))
    assert answer.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert hooks.installed == 1 and not hooks.active(HEARTBEAT)  # exhausted: out of the request path
    assert [f.id for f in injector.list()] == [1, 2]  # but still listed, with its counters
    injector.clear()
    assert hooks.installed == 0 and injector.list() == []


def test_a_throttle_fault_needs_its_throttle_ms_and_only_it_takes_one():
    spec = FaultSpec.parse({"api": "Produce", "action": "throttle", "throttle_ms": 250, "client_id": "a"})
    assert (spec.action, spec.throttle_ms) == ("throttle", 250)
    assert spec.to_json()["throttle_ms"] == 250
    for raw in ({"api": "Produce", "action": "throttle"}, {"api": "Produce", "action": "throttle", "throttle_ms": 0},
                {"api": "Produce", "action": "delay", "delay_ms": 5, "throttle_ms": 250}):
        with pytest.raises(FaultError, match="throttle_ms"):
            FaultSpec.parse(raw)
