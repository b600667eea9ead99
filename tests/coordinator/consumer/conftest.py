"""Every consumer group test here also checks the uniform assignor's token shortcut: a target found by
its token (uniform_homogeneous.Memory._find) must equal the current target, as a full comparison says."""
import pytest

from kcoord.coordinator.consumer.assignors import uniform_homogeneous


@pytest.fixture(autouse=True)
def _verify_assignor_tokens(monkeypatch):
    monkeypatch.setattr(uniform_homogeneous, "VERIFY_TOKENS", True)
