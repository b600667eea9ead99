import pytest

from coordinator.testing import CoordinatorContext


@pytest.fixture
def ctx():
    return CoordinatorContext()
