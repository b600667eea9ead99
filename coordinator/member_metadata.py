"""MemberMetadata: one member of a classic group, as the coordinator tracks it."""
from __future__ import annotations

from collections.abc import Callable, Iterable


class MemberMetadata:
    __slots__ = ("member_id", "group_id", "group_instance_id", "client_id", "client_host",
                 "rebalance_timeout_ms", "session_timeout_ms", "protocol_type", "supported_protocols",
                 "assignment", "awaiting_join", "awaiting_sync", "is_new",
                 "heartbeat_satisfied", "heartbeat_expiry")

    def __init__(self, member_id: str, group_id: str, group_instance_id: str | None, client_id: str,
                 client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                 protocol_type: str, supported_protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = list(supported_protocols)
        self.assignment = b""
        # Whether a JoinGroup / SyncGroup of this member is parked; the continuation that answers it is
        # in the group manager's table (kcoord.coordinator.parked), which alone sets these.
        self.awaiting_join = False
        self.awaiting_sync = False
        # A new member sits in a parked JoinGroup and cannot heartbeat; it is expired by the
        # new-member join timeout instead of being considered alive while awaiting join.
        self.is_new = False
        self.heartbeat_satisfied = False
        # (member id, timer key, callback) of its session expiry, made on its first heartbeat and
        # reused by every later one (the coordinator's rebalance module owns it)
        self.heartbeat_expiry: tuple[str, tuple, Callable[[], None]] | None = None

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync

    @property
    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return self.heartbeat_satisfied
        # A member parked in a rebalance cannot heartbeat, so it counts as alive.
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def protocols(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata: rejoining with this changes nothing."""
        if len(protocols) != len(self.supported_protocols):
            return False
        return all(a[0] == b[0] and bytes(a[1]) == bytes(b[1])
                   for a, b in zip(protocols, self.supported_protocols, strict=True))

    def vote(self, candidates: Iterable[str]) -> str:
        """The first of this member's protocols (in its own preference order) that all support."""
        candidates = set(candidates)
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of the candidates {candidates}")

    def __repr__(self) -> str:
        return (f"MemberMetadata(member_id={self.member_id!r}, group_instance_id={self.group_instance_id!r}, "
                f"client_id={self.client_id!r}, client_host={self.client_host!r}, "
                f"session_timeout_ms={self.session_timeout_ms}, rebalance_timeout_ms={self.rebalance_timeout_ms}, "
                f"protocols={sorted(self.protocols())})")
