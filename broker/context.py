"""What a handler knows about the request it serves, besides the decoded body."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kcoord.coordinator.results import RequestContext as CoordinatorContext


@dataclass(slots=True)
class RequestContext:
    broker: Any            # the composition root (kcoord.broker.app.Broker): .config, .logs, .groups, .metrics, ...
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    client_port: int
    listener: str          # listener name the connection came in on, e.g. "PLAINTEXT"
    connection_id: str     # "local_host:port-remote_host:port-n", as Kafka names connections
    session: Any = None    # kcoord.broker.security.session.ConnectionSession: .principal, SASL state

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def for_coordinator(self) -> CoordinatorContext:
        """What the group coordinator takes of this request: client id and host, api version."""
        return CoordinatorContext(self.client_id or "", self.client_host, self.api_version)
