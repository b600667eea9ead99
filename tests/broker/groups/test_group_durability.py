"""A generation's stored assignment is durable once SyncGroup answers: after SIGKILL and restart the
group is loaded Stable with the same members, generation and assignments, so members carry on."""
from __future__ import annotations

import signal

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from kcoord.testkit.waiting import wait_until
from tests.broker.groups.rawgroup import Member, assignment

GROUP = "durable-membership"


def _describe(bootstrap: str):
    def ready():
        with KafkaWireClient.connect(bootstrap) as client:
            described = client.request(m.DescribeGroupsRequest(groups=[GROUP]), 5).groups[0]
        return None if described.error_code == E.COORDINATOR_LOAD_IN_PROGRESS else (described,)

    (described,) = wait_until(ready, 30, "the group loaded")
    return described


def test_sync_group_assignment_survives_sigkill(restartable_server):
    server = restartable_server
    a, b = Member(server.bootstrap, GROUP, 5), Member(server.bootstrap, GROUP, 5)
    try:
        for member in (a, b):
            assert member.join().error_code == E.MEMBER_ID_REQUIRED
        a.send_join()
        b.send_join()
        ra, rb = a.receive_join(), b.receive_join()
        assert ra.error_code == rb.error_code == E.NONE
        leader, follower = (a, b) if ra.leader == a.member_id else (b, a)
        plan = {leader.member_id: assignment([0, 1]), follower.member_id: assignment([2])}
        follower.send_sync()
        leader.send_sync(plan)
        assert follower.client.receive().error_code == leader.client.receive().error_code == E.NONE
        before = _describe(server.bootstrap)
    finally:
        a.close()
        b.close()

    server.restart(signal.SIGKILL)

    after = _describe(server.bootstrap)
    assert (after.group_state, after.protocol_data) == ("Stable", "range")
    assert {mm.member_id: mm.member_assignment for mm in after.members} == plan
    assert [(mm.member_id, mm.member_assignment) for mm in after.members] == [
        (mm.member_id, mm.member_assignment) for mm in before.members]
    for old in (a, b):  # the same members, reconnected, heartbeat in the same generation
        again = Member(server.bootstrap, GROUP, 5)
        again.member_id, again.generation_id = old.member_id, old.generation_id
        try:
            assert again.heartbeat() == E.NONE
            assert again.sync().assignment == plan[old.member_id]  # a late SyncGroup in Stable
        finally:
            again.close()
