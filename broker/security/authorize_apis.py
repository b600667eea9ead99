"""The per-API authorization table the server applies before each handler when an authorizer is
configured (broker/server.py, KafkaConnection._handle): api key -> guard(ctx, request, handler).
APIs without a guard either need none before authentication matters (ApiVersions, SaslHandshake,
SaslAuthenticate) or check inside their handler (the ACL and SCRAM admin APIs)."""
from __future__ import annotations

from kcoord.broker.security import authorize_admin, authorize_groups, authorize_topics, authorize_txn

GUARDS = {**authorize_groups.GUARDS, **authorize_topics.GUARDS, **authorize_admin.GUARDS, **authorize_txn.GUARDS}
