"""ACL bindings and filters with Kafka's codes (ResourceType, PatternType, AclOperation,
AclPermissionType), and how a filter matches a binding (AclBindingFilter.matches: ANY matches all; a
MATCH pattern filter matches the literal name, the wildcard "*" and every prefix of the name; the host is
compared literally, a CIDR host too: kcoord.broker.security.acl_host)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import IntEnum

from kcoord.broker.security.acl_host import host_refusal


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class AclBindingFilter:
    """None (or ANY) in a field matches anything."""
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == acl.permission_type

    def _pattern_matches(self, acl: AclBinding) -> bool:
        pattern, name = self.pattern_type, self.resource_name
        if pattern == PatternType.MATCH:
            if name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (name, WILDCARD)
            return acl.pattern_type == PatternType.PREFIXED and name.startswith(acl.resource_name)
        if pattern != PatternType.ANY and pattern != acl.pattern_type:
            return False
        return name is None or name == acl.resource_name


def validate(acl: AclBinding) -> str | None:
    """Why CreateAcls refuses `acl` (INVALID_REQUEST), or None (AclControlManager.validateNewAcl)."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or acl.resource_type not in ResourceType._value2member_map_:
        return f"Invalid resourceType {acl.resource_type}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY) or acl.operation not in AclOperation._value2member_map_:
        return f"Invalid operation {acl.operation}"
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {acl.permission_type}"
    if not acl.resource_name:
        return "Resource name should not be empty"
    kind, sep, _name = acl.principal.partition(":")
    if not sep or not kind:
        return f"Could not parse principal from `{acl.principal}` (no colon is present separating the principal type from the principal name)"
    return host_refusal(acl.host)
