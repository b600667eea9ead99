import pytest

from kcoord.coordinator.testing import ManualClock


@pytest.fixture
def clock():
    """The suite's one manual clock; storage takes `clock.now_ms`."""
    return ManualClock(1_000_000)
