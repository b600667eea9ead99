"""What a handler knows about the request it serves, besides the decoded body."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kcoord.coordinator.results import RequestContext as CoordinatorContext

if TYPE_CHECKING:  # app.py imports the server, which builds these: a run-time import would be a cycle
    from kcoord.broker.app import Broker
    from kcoord.broker.security.session import ConnectionSession


@dataclass(slots=True)
class RequestContext:
    broker: Broker         # the composition root: .config, .logs, .group_coordinator, .txn_coordinator, .metrics, ...
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    client_port: int
    listener: str          # listener name the connection came in on, e.g. "PLAINTEXT"
    connection_id: str     # "local_host:port-remote_host:port-n", as Kafka names connections
    session: ConnectionSession  # .principal, SASL state (every connection has one; plaintext: ANONYMOUS)
    # Set by a handler (a quota broken: broker/quota.py) or a `throttle` fault: the server puts it in the
    # response's throttle_time_ms and mutes the connection that long after answering (KIP-219)
    throttle_ms: int = 0

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def for_coordinator(self) -> CoordinatorContext:
        """What the group coordinator takes of this request: client id and host, api version."""
        return CoordinatorContext(self.client_id or "", self.client_host, self.api_version)
