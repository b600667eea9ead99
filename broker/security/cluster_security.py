"""Cluster mode's ACLs and SCRAM credentials: kept in the metadata store, followed by every node (issue #26).

Kafka 4 keeps them as AccessControlEntryRecord / UserScramCredentialRecord in its metadata log and every
broker's authorizer and credential cache follow it (AclPublisher, ScramPublisher); ZooKeeper-era Kafka
kept them under `/kafka-acl` and `/config/users` with change notifications. Here, under the cluster
prefix (beside kcoord.cluster.keys' keys):

| key                         | value                                                |
|-----------------------------|------------------------------------------------------|
| `acls/<sha256 of binding>`  | the AclBinding as JSON (so one binding is one key)   |
| `scram/<user>/<mechanism>`  | salt, StoredKey, ServerKey, iterations (no password) |

(the user name is percent-encoded: a `/` in it cannot split the key). Any node writes a change in one
txn (a binding or credential is a fact of its own: no compare needed; a request's changes land at one
revision) and answers once its own follower has it, so the client sees its change on that node at once;
the others apply it as their watch delivers it. Handlers reach this through `Security.cluster`.
"""
from __future__ import annotations

import hashlib
import json
import logging
import urllib.parse
from collections.abc import Mapping, Sequence

from kcoord.broker.security.acl import AclBinding
from kcoord.broker.security.authorizer import StandardAuthorizer
from kcoord.metadata.prefix_follower import PrefixFollower
from kcoord.metadata.scram_store import (
    HASHES,
    ScramCredential,
    ScramStore,
    decode_credential,
    encode_credential,
)
from kcoord.metadata.store import Delete, MetadataStore, Op, Put

log = logging.getLogger("kcoord.security.cluster")

ACLS = "acls/"
SCRAM = "scram/"
MAX_TXN_OPS = 128   # etcd's default --max-txn-ops


def _canonical(acl: AclBinding) -> bytes:
    return json.dumps(acl.to_json(), sort_keys=True, separators=(",", ":")).encode()


def acl_key(acl: AclBinding) -> str:
    return f"{ACLS}{hashlib.sha256(_canonical(acl)).hexdigest()[:32]}"


def scram_key(user: str, mechanism: str) -> str:
    return f"{SCRAM}{urllib.parse.quote(user, safe='')}/{mechanism}"


def decode(values: Mapping[str, bytes]) -> tuple[list[AclBinding], dict[str, dict[str, ScramCredential]]]:
    """The ACLs and credentials of `acls/` and `scram/` (whole keys); a value that does not decode is
    logged and skipped (one bad key must not disable every other ACL)."""
    acls: list[AclBinding] = []
    users: dict[str, dict[str, ScramCredential]] = {}
    for key, value in sorted(values.items()):
        try:
            if key.startswith(ACLS):
                acls.append(AclBinding(**json.loads(value)))
            elif key.startswith(SCRAM):
                user, _, mechanism = key[len(SCRAM):].rpartition("/")
                if mechanism in HASHES:
                    users.setdefault(urllib.parse.unquote(user), {})[mechanism] = decode_credential(json.loads(value))
        except (ValueError, TypeError, KeyError) as exc:
            log.error("ignoring the bad value of %s: %s", key, exc)
    return acls, users


class ClusterSecurity:
    def __init__(self, store: MetadataStore, authorizer: StandardAuthorizer | None, scram: ScramStore) -> None:
        self._store = store
        self._authorizer = authorizer
        self._scram = scram
        self.acls = PrefixFollower(store, ACLS, self._apply_acls)
        self.scram = PrefixFollower(store, SCRAM, self._apply_scram)

    async def start(self) -> None:
        """Follow from now on; returns once the first snapshots are applied."""
        await self.acls.start()
        await self.scram.start()

    async def close(self) -> None:
        await self.acls.close()
        await self.scram.close()

    def _apply_acls(self, values: Mapping[str, bytes]) -> None:
        if self._authorizer is not None:
            self._authorizer.replace_acls(decode({ACLS + k: v for k, v in values.items()})[0])

    def _apply_scram(self, values: Mapping[str, bytes]) -> None:
        self._scram.replace_all(decode({SCRAM + k: v for k, v in values.items()})[1])

    # -- writes (StoreError when the store does not answer: nothing is known to have changed) -------------
    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        unique = {acl_key(b): b for b in bindings}
        await self._write(self.acls, [Put(key, _canonical(b)) for key, b in unique.items()])

    async def delete_acls(self, bindings: Sequence[AclBinding]) -> None:
        await self._write(self.acls, [Delete(key) for key in dict.fromkeys(acl_key(b) for b in bindings)])

    async def alter_scram(self, upserts: Sequence[tuple[str, str, ScramCredential]],
                          deletions: Sequence[tuple[str, str]]) -> None:
        ops: list[Op] = [Delete(scram_key(u, m)) for u, m in deletions]
        ops += [Put(scram_key(u, m), json.dumps(encode_credential(c)).encode()) for u, m, c in upserts]
        await self._write(self.scram, ops)

    async def _write(self, follower: PrefixFollower, ops: Sequence[Op]) -> None:
        revision = 0
        for start in range(0, len(ops), MAX_TXN_OPS):
            result = await self._store.txn([], ops[start:start + MAX_TXN_OPS])
            revision = result.revision
        if revision:  # read-your-writes on this node
            await follower.see_own_write(revision)
