"""How a known member's requests are answered in each group state (reference 2.2, 2.6-2.10)."""
import pytest

from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.results import OffsetCommitRequestPartition as P
from kcoord.coordinator.testing import Capture
from kcoord.protocol.errors import ErrorCode as E

S = GroupState
PARKED = "parked"


def _group_in(ctx, state):
    """A two-member group moved to `state`; returns (a known member id, the group's generation)."""
    leader, follower = ctx.stable_group("g", 2)
    g = ctx.groups["g"]
    if state is S.PREPARING_REBALANCE:
        ctx.join("g", leader)
    elif state is S.COMPLETING_REBALANCE:
        ctx.join("g", leader)
        ctx.join("g", follower)
    elif state is S.DEAD:
        g.transition_to(S.DEAD, ctx.clock.now_ms())
    assert g.state is state
    return follower, g.generation_id


MATRIX = {
    #                          heartbeat                    sync                         commit                        leave
    S.PREPARING_REBALANCE: (E.REBALANCE_IN_PROGRESS, E.REBALANCE_IN_PROGRESS, E.NONE, E.NONE),
    S.COMPLETING_REBALANCE: (E.NONE, PARKED, E.REBALANCE_IN_PROGRESS, E.NONE),
    S.STABLE: (E.NONE, E.NONE, E.NONE, E.NONE),
    S.DEAD: (E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE,
             E.COORDINATOR_NOT_AVAILABLE),
}


@pytest.mark.parametrize("state", list(MATRIX), ids=str)
def test_known_member_answers_per_state(ctx, state):
    want_hb, want_sync, want_commit, want_leave = MATRIX[state]
    member, gen = _group_in(ctx, state)
    assert ctx.heartbeat("g", member, gen) == want_hb
    sync = ctx.sync("g", member, gen)
    assert (sync.result.error if sync.called else PARKED) == want_sync
    commit = Capture()
    ctx.commit_offsets("g", member, None, gen, [P("t", 0, 1)], commit)
    assert commit.result[("t", 0)] == want_commit
    left = ctx.leave("g", (member, None, None))
    assert (left.error if left.error != E.NONE else left.members[0].error) == want_leave


@pytest.mark.parametrize("state", [S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE], ids=str)
def test_wrong_generation_and_unknown_member_per_state(ctx, state):
    member, gen = _group_in(ctx, state)
    assert ctx.heartbeat("g", member, gen + 5) == E.ILLEGAL_GENERATION
    assert ctx.sync("g", member, gen + 5).result.error == E.ILLEGAL_GENERATION
    assert ctx.heartbeat("g", "stranger", gen) == E.UNKNOWN_MEMBER_ID
    assert ctx.sync("g", "stranger", gen).result.error == E.UNKNOWN_MEMBER_ID
    commit = Capture()
    ctx.commit_offsets("g", member, None, gen + 5, [P("t", 0, 1)], commit)
    assert commit.result[("t", 0)] == E.ILLEGAL_GENERATION
