"""GroupConfig, the state enum's transitions, and the timer queue."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.classic_context import ClassicContext
from kcoord.coordinator.config import GroupConfig
from kcoord.coordinator.group_metadata import GroupMetadata, IllegalStateTransition
from kcoord.coordinator.group_state import GroupState
from kcoord.coordinator.purgatory import JoinPhase
from kcoord.coordinator.testing import CoordinatorContext, ManualClock

S = GroupState


def test_config_defaults_are_kafkas():
    c = GroupConfig()
    assert (c.group_min_session_timeout_ms, c.group_max_session_timeout_ms, c.group_initial_rebalance_delay_ms,
            c.group_max_size, c.new_member_join_timeout_ms, c.offsets_topic_num_partitions,
            c.offsets_retention_minutes, c.offsets_retention_check_interval_ms, c.offset_metadata_max_bytes,
            c.offsets_commit_timeout_ms) == (6000, 1_800_000, 3000, 2_147_483_647, 300_000, 50, 10_080,
                                             600_000, 4096, 5000)


def test_config_from_kafka_property_names():
    c = GroupConfig.from_properties({"group.max.size": "5", "offsets.topic.num.partitions": 3,
                                     "log.dirs": "/tmp/x", "group.initial.rebalance.delay.ms": "0"})
    assert (c.group_max_size, c.offsets_topic_num_partitions, c.group_initial_rebalance_delay_ms) == (5, 3, 0)
    assert c.to_properties()["group.max.size"] == 5
    with pytest.raises(ValueError):
        GroupConfig.from_properties({"group.max.size": "many"})


@pytest.mark.parametrize("src,dst,ok", [
    (S.EMPTY, S.PREPARING_REBALANCE, True), (S.EMPTY, S.STABLE, False), (S.EMPTY, S.COMPLETING_REBALANCE, False),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, True), (S.PREPARING_REBALANCE, S.EMPTY, True),
    (S.PREPARING_REBALANCE, S.STABLE, False), (S.COMPLETING_REBALANCE, S.STABLE, True),
    (S.COMPLETING_REBALANCE, S.EMPTY, False), (S.STABLE, S.PREPARING_REBALANCE, True),
    (S.STABLE, S.COMPLETING_REBALANCE, False), (S.STABLE, S.DEAD, True), (S.DEAD, S.PREPARING_REBALANCE, False),
])
def test_transition_to_enforces_valid_previous_states(src, dst, ok):
    g = GroupMetadata("g", 0, src)
    if ok:
        g.transition_to(dst, 42)
        assert g.state is dst and g.previous_state is src and g.current_state_timestamp == 42
    else:
        with pytest.raises(IllegalStateTransition):
            g.transition_to(dst, 42)
        assert g.state is src


def test_timers_are_keyed_replaceable_and_fire_in_order():
    clock = ManualClock(0)
    fired = []
    clock.timers.schedule("a", 100, lambda: fired.append(("a", clock.now_ms())))
    clock.timers.schedule("b", 50, lambda: fired.append(("b", clock.now_ms())))
    clock.timers.schedule("a", 200, lambda: fired.append(("a2", clock.now_ms())))  # replaces a
    clock.timers.schedule("c", 10, lambda: fired.append(("c", clock.now_ms())))
    assert clock.timers.cancel("c") and not clock.timers.cancel("c")
    clock.sleep(150)
    assert fired == [("b", 50)]
    clock.sleep(100)
    assert fired == [("b", 50), ("a2", 200)] and clock.now_ms() == 250 and len(clock.timers) == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["schedule", "push", "cancel", "sleep"]), st.integers(0, 4),
                          st.integers(0, 50)), max_size=60))
def test_timer_queue_matches_a_naive_model(steps):
    """`push` is `schedule` with the pending callback (a steady heartbeat's session timer): the same
    deadline and order as a schedule at that step, the callback of the schedule before it."""
    clock = ManualClock(0)
    fired = []
    model: dict[int, tuple[int, int, int]] = {}  # key -> (deadline, order, seq of its callback's schedule)
    expected = []
    for seq, (op, key, ms) in enumerate(steps):
        if op == "schedule":
            clock.timers.schedule(key, ms, lambda k=key, s=seq: fired.append((k, s, clock.now_ms())))
            model[key] = (clock.now_ms() + ms, seq, seq)
        elif op == "push":
            assert clock.timers.push(key, ms) == (key in model)
            if key in model:
                model[key] = (clock.now_ms() + ms, seq, model[key][2])
        elif op == "cancel":
            assert clock.timers.cancel(key) == (model.pop(key, None) is not None)
        else:
            target = clock.now_ms() + ms
            due = sorted((d, order, s, k) for k, (d, order, s) in model.items() if d <= target)
            for d, _order, s, k in due:
                expected.append((k, s, d))
                del model[k]
            clock.sleep(ms)
        assert fired == expected
    assert len(clock.timers) == len(model)


@pytest.mark.parametrize("protocol", [ClassicContext, JoinPhase])
def test_the_steps_protocols_are_met(protocol):
    """The classic steps see GroupMetadataManager only as a ClassicContext, and the purgatory sees the
    Rebalancer only as a JoinPhase: every member these protocols declare is there (methods callable)."""
    manager = CoordinatorContext().manager("g")
    obj = manager if protocol is ClassicContext else manager.rebalance
    methods = {name for name, v in vars(protocol).items() if callable(v) and not name.startswith("_")}
    assert methods and set(protocol.__annotations__)
    missing = sorted(name for name in set(protocol.__annotations__) | methods if not hasattr(obj, name))
    assert not missing, f"{type(obj).__name__} lacks {missing} of {protocol.__name__}"
    assert all(callable(getattr(obj, name)) for name in methods)
