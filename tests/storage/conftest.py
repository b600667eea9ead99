import pytest
from storage_helpers import ManualClock


@pytest.fixture
def clock():
    return ManualClock()
