"""Hypothesis strategies for partition states and clusters."""
from hypothesis import strategies as st

from kcoord.cluster.partition_state import NO_LEADER, LeaderRecoveryState, PartitionRegistration

BROKERS = list(range(6))


@st.composite
def registrations(draw, reassigning=True):
    """A valid registration: up to 5 distinct replicas of brokers 0..5, a non-empty ISR among them (as
    Kafka keeps it without ELR), a leader in the ISR or none, any epochs, maybe a reassignment."""
    replicas = draw(st.lists(st.sampled_from(BROKERS), min_size=1, max_size=5, unique=True))
    isr = draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True))
    leader = draw(st.sampled_from([NO_LEADER, *isr]))
    adding: list[int] = []
    removing: list[int] = []
    if reassigning and len(replicas) > 1 and draw(st.booleans()):
        split = draw(st.integers(0, len(replicas) - 1))
        adding = draw(st.lists(st.sampled_from(replicas[split:]), unique=True))
        removing = draw(st.lists(st.sampled_from(replicas[:split]) if split else st.nothing(), unique=True))
    recovering = draw(st.booleans()) and len(isr) == 1 and leader != NO_LEADER
    return PartitionRegistration(
        replicas=tuple(replicas), isr=tuple(isr), leader=leader,
        leader_epoch=draw(st.integers(0, 1000)), partition_epoch=draw(st.integers(0, 1000)),
        leader_recovery_state=LeaderRecoveryState.RECOVERING if recovering else LeaderRecoveryState.RECOVERED,
        adding_replicas=tuple(adding), removing_replicas=tuple(removing))


def live_sets():
    return st.frozensets(st.sampled_from(BROKERS))
