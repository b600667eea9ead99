"""AlterUserScramCredentials (key 51): add, replace or delete users' SCRAM credentials (KIP-554).

Versions:
  v0: flexible; upsertions carry salt + salted password (the client derives it), never the password
ALTER on the cluster is required. Per user, the first problem answers for all of that user's changes,
which are then not made (Kafka's ScramControlManager): UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL
(empty name, iterations outside 4096-16384), DUPLICATE_RESOURCE (a mechanism changed twice),
RESOURCE_NOT_FOUND (deleting what does not exist). The rest are stored durably at once: in cluster mode
in the metadata store, which every node follows (a user created through one node authenticates on any).
"""
from __future__ import annotations

from kcoord.broker.context import RequestContext
from kcoord.broker.registry import api
from kcoord.broker.security.acl import AclOperation
from kcoord.broker.security.check import cluster_allowed
from kcoord.broker.security.scram import MAX_ITERATIONS, MIN_ITERATIONS, credential_from_salted
from kcoord.metadata.scram_store import MECHANISM_TYPES
from kcoord.metadata.store import StoreError
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode


def _problem(change, seen: set, store, deleting: bool) -> tuple[ErrorCode, str] | None:
    mechanism = MECHANISM_TYPES.get(change.mechanism)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if not change.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if (change.name, mechanism) in seen:
        return ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
    seen.add((change.name, mechanism))
    if deleting:
        if store.get(change.name, mechanism) is None:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None
    if change.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if change.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


@api(key=51, name="AlterUserScramCredentials", min_version=0, max_version=0)
async def handle(ctx: RequestContext, request: m.AlterUserScramCredentialsRequest):
    R = m.AlterUserScramCredentialsResponse
    users = list(dict.fromkeys([c.name for c in request.deletions] + [c.name for c in request.upsertions]))
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return R(throttle_time_ms=0, results=[R.AlterUserScramCredentialsResult(
            user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None) for u in users])
    store = ctx.broker.security.scram
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: set = set()
    for change, deleting in [(c, True) for c in request.deletions] + [(c, False) for c in request.upsertions]:
        problem = _problem(change, seen, store, deleting)
        if problem is not None:
            errors.setdefault(change.name, problem)
    upserts = [(c.name, MECHANISM_TYPES[c.mechanism],
                credential_from_salted(MECHANISM_TYPES[c.mechanism], bytes(c.salted_password), bytes(c.salt),
                                       c.iterations))
               for c in request.upsertions if c.name not in errors]
    deletions = [(c.name, MECHANISM_TYPES[c.mechanism]) for c in request.deletions if c.name not in errors]
    cluster = ctx.broker.security.cluster
    if cluster is None:
        store.apply(upserts, deletions)
    elif upserts or deletions:
        try:
            await cluster.alter_scram(upserts, deletions)
        except StoreError as exc:
            for user in {u for u, *_ in upserts} | {u for u, _ in deletions}:
                errors[user] = (ErrorCode.REQUEST_TIMED_OUT, f"The cluster metadata store did not answer: {exc}")
    return R(throttle_time_ms=0, results=[R.AlterUserScramCredentialsResult(
        user=u, error_code=errors.get(u, (ErrorCode.NONE, None))[0], error_message=errors.get(u, (0, None))[1])
        for u in users])
