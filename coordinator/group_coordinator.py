"""GroupCoordinator: the classic consumer-group coordinator, composed from one module per concern."""
from __future__ import annotations

from coordinator.join import JoinGroupMixin
from coordinator.membership import MembershipMixin
from coordinator.sync import SyncGroupMixin


class GroupCoordinator(JoinGroupMixin, SyncGroupMixin, MembershipMixin):
    """Pure and deterministic: handlers take a callback and return; time comes from the injected
    clock, timers from the injected keyed timer, and every record goes through the one writer."""
