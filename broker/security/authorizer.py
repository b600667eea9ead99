"""Kafka's StandardAuthorizer: super.users are allowed everything; otherwise the ACLs whose pattern
matches the resource (a LITERAL one with its exact name, the LITERAL wildcard "*", a PREFIXED one whose
name starts the resource's) are applied to the principal (or User:*) and host ("*", the client's address
or a CIDR block holding it: kcoord.broker.security.acl_host): any DENY wins, then any ALLOW; with no ACL
on the resource at all, allow.everyone.if.no.acl.found decides. An ALLOW for READ, WRITE, DELETE or ALTER
implies DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS (never for DENY).
(StandardAuthorizer.authorize, StandardAuthorizerData.findResult)

ACLs are kept durably in `<log.dirs>/kcoord-acls.json` (Kafka keeps them in its metadata log); in cluster
mode in the metadata store instead (kcoord.broker.security.cluster_security follows them into
`replace_acls`; the file is not read).
"""
from __future__ import annotations

import os
from typing import Any

from kcoord.broker.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kcoord.broker.security.acl_host import host_matches
from kcoord.metadata.json_file import read_json, write_json_atomically

FILE_NAME = "kcoord-acls.json"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
_IMPLIES_DESCRIBE = {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                     AclOperation.ALTER}
_IMPLIES_DESCRIBE_CONFIGS = {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
# What authorized_operations reports per resource type (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE, AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def _result(acl: AclBinding, operation: int) -> bool | None:
    """True allow, False deny, None: this ACL says nothing about `operation` (principal/host checked)."""
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:
            return None
    return acl.permission_type == AclPermissionType.ALLOW


def _pattern_matches(acl: AclBinding, name: str) -> bool:
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name == name or acl.resource_name == WILDCARD
    return acl.pattern_type == PatternType.PREFIXED and name.startswith(acl.resource_name)


class StandardAuthorizer:
    def __init__(self, path: str, super_users: list[str], allow_if_no_acl: bool, *, read_file: bool = True) -> None:
        self.path = path
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: list[AclBinding] = [AclBinding(**a) for a in read_json(path, {}).get("acls", [])] if read_file else []
        # Cluster mode: nothing but super users is allowed until the cluster's ACLs are loaded (Kafka's broker
        # accepts requests only once StandardAuthorizer.completeInitialLoad ran; kcoord's listeners are bound
        # before the node joins, so a DENY must not be missed meanwhile).
        self.loading_complete = read_file

    @classmethod
    def from_config(cls, cfg: Any, log_dir: str, *, read_file: bool = True) -> StandardAuthorizer:
        return cls(os.path.join(log_dir, FILE_NAME), cfg.get("super.users"),
                   cfg.get("allow.everyone.if.no.acl.found"), read_file=read_file)

    def authorize(self, principal: Any, host: str, operation: int, resource_type: int, name: str) -> bool:
        who = str(principal)
        if who in self.super_users:
            return True
        if not self.loading_complete:
            return False
        allowed = False
        found = False
        for acl in self.acls:
            if acl.resource_type != resource_type or not _pattern_matches(acl, name):
                continue
            found = True
            if acl.principal not in (who, WILDCARD_PRINCIPAL) or not host_matches(acl.host, host):
                continue
            result = _result(acl, operation)
            if result is False:
                return False
            allowed = allowed or result is True
        return allowed or (not found and self.allow_if_no_acl)

    def authorized_operations(self, principal: Any, host: str, resource_type: int, name: str) -> int:
        """The bit field of SUPPORTED_OPERATIONS allowed on the resource (1 << operation code)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    # -- CreateAcls / DescribeAcls / DeleteAcls ------------------------------------------------------
    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [acl for acl in self.acls if flt.matches(acl)]

    def create(self, bindings: list[AclBinding]) -> None:
        new = list(self.acls)
        for acl in bindings:
            if acl not in new:
                new.append(acl)
        self._store(new)

    def matching(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter matches (a binding matched by several filters is listed under each)."""
        return [[acl for acl in self.acls if flt.matches(acl)] for flt in filters]

    def delete(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (a binding matched by several filters is listed under each)."""
        removed = self.matching(filters)
        gone = {acl for matched in removed for acl in matched}
        self._store([acl for acl in self.acls if acl not in gone])
        return removed

    def replace_acls(self, acls: list[AclBinding]) -> None:
        """Cluster mode: the ACLs as the metadata store has them now (nothing written here)."""
        self.acls = acls
        self.loading_complete = True

    def _store(self, acls: list[AclBinding]) -> None:
        write_json_atomically(self.path, {"acls": [acl.to_json() for acl in acls]})
        self.acls = acls


def all_operations(resource_type: int) -> int:
    """authorized_operations when no authorizer is configured: every supported operation."""
    bits = 0
    for op in SUPPORTED_OPERATIONS[resource_type]:
        bits |= 1 << op
    return bits
