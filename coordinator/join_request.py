"""A JoinGroup as the classic steps take it (join.py, static_member.py): every version's request read
once, by that version's rules (see join.py's header for what each version added)."""
from __future__ import annotations

from dataclasses import dataclass

from kcoord.coordinator.results import RequestContext

UNKNOWN_MEMBER_ID = ""


@dataclass(slots=True)
class JoinRequest:
    """A JoinGroup as every version means it (the version's rules applied once, here)."""
    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    reason: str | None
    supports_skip_assignment: bool

    @classmethod
    def of(cls, context: RequestContext, request) -> JoinRequest:
        version = context.api_version
        instance_id = request.group_instance_id if version >= 5 else None
        return cls(request.group_id, request.member_id, instance_id,
                   version >= 4 and instance_id is None, context.client_id, context.client_host,
                   request.session_timeout_ms if version == 0 else request.rebalance_timeout_ms,
                   request.session_timeout_ms, request.protocol_type,
                   [(p.name, p.metadata) for p in request.protocols],
                   request.reason if version >= 8 else None, version >= 9)

    @property
    def why(self) -> str:
        return "not provided" if self.reason is None else self.reason
