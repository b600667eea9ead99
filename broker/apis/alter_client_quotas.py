"""AlterClientQuotas (key 49, KIP-546): set or remove quotas of user / client-id / ip entities and their
defaults (a null entity name), durably (metadata/client_quotas.py; in cluster mode in the metadata store,
broker/cluster_quotas.py, so every node enforces them); enforced from the next request (broker/quota.py).

Versions (we serve 0-1, as Kafka 4.2 does):
  v0: entries [entity [entity_type, entity_name], ops [key, value, remove]], validate_only
  v1: flexible
Each entity is answered on its own with Kafka's messages (ClientQuotaControlManager.alterClientQuotas):
INVALID_REQUEST for a bad entity, key or value. ALTER_CONFIGS on the cluster is required
(ControllerApis.handleAlterClientQuotas: CLUSTER_AUTHORIZATION_FAILED for every entity). A metadata store
that does not answer is REQUEST_TIMED_OUT for every entity (Kafka's controller timing out the request).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import cluster_allowed
from kcoord.metadata.client_quotas import Alteration, QuotaRefused, validate_entity
from kcoord.metadata.store import StoreError
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


@api(key=49, name="AlterClientQuotas", min_version=0, max_version=1)
async def handle(ctx: RequestContext, request: m.AlterClientQuotasRequest):
    R = m.AlterClientQuotasResponse
    E = R.EntryData

    def entry(entity_data, code, message):
        return E(error_code=code, error_message=message, entity=[
            E.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entity_data])

    if not cluster_allowed(ctx, AclOperation.ALTER_CONFIGS):
        return R(throttle_time_ms=0, entries=[entry(e.entity, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                                             for e in request.entries])
    answers: list = [None] * len(request.entries)
    alterations, positions = [], []
    for i, e in enumerate(request.entries):
        try:
            entity = validate_entity([(d.entity_type, d.entity_name) for d in e.entity])
        except QuotaRefused as exc:
            answers[i] = entry(e.entity, ErrorCode.INVALID_REQUEST, str(exc))
            continue
        alterations.append(Alteration(entity, [(op.key, None if op.remove else op.value) for op in e.ops]))
        positions.append(i)
    cluster = ctx.broker.cluster_quotas
    try:
        results = (ctx.broker.client_quotas.alter(alterations, request.validate_only) if cluster is None
                   else await cluster.alter(alterations, request.validate_only))  # every node follows it
    except StoreError as exc:
        message = f"The cluster metadata store did not answer: {exc}"
        return R(throttle_time_ms=0, entries=[entry(e.entity, ErrorCode.REQUEST_TIMED_OUT, message)
                                             for e in request.entries])
    for i, (_entity, message, code_name) in zip(positions, results, strict=True):
        answers[i] = entry(request.entries[i].entity, ErrorCode[code_name], message)
    return R(throttle_time_ms=0, entries=answers)
