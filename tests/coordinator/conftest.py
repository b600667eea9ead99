import pytest

from kcoord.coordinator.testing import CoordinatorContext


@pytest.fixture
def ctx():
    return CoordinatorContext()
