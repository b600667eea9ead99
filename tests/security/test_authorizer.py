"""The authorizer's rules, as Kafka's StandardAuthorizer (StandardAuthorizerData.authorize / findResult):
super.users, deny over allow, LITERAL / PREFIXED / wildcard patterns, User:* and host matching, the
operations that imply DESCRIBE (ALLOW only), allow.everyone.if.no.acl.found; and durability."""
from __future__ import annotations

import pytest

from kcoord.broker.security.acl import AclBinding, AclBindingFilter
from kcoord.broker.security.acl import AclOperation as Op
from kcoord.broker.security.acl import AclPermissionType as Perm
from kcoord.broker.security.acl import PatternType as Pat
from kcoord.broker.security.acl import ResourceType as Res
from kcoord.broker.security.authorizer import StandardAuthorizer
from kcoord.broker.security.principal import user

ALICE, BOB = user("alice"), user("bob")
HOST = "10.0.0.5"


def acl(name, op=Op.READ, perm=Perm.ALLOW, pattern=Pat.LITERAL, principal="User:alice", host="*", res=Res.GROUP):
    return AclBinding(res, name, pattern, principal, host, op, perm)


@pytest.fixture
def authz(tmp_path):
    return StandardAuthorizer(str(tmp_path / "acls.json"), ["User:root"], allow_if_no_acl=False)


def ok(authz, principal, op, name, res=Res.GROUP, host=HOST):
    return authz.authorize(principal, host, op, res, name)


def test_no_acl_denies_unless_allow_everyone(tmp_path, authz):
    assert not ok(authz, ALICE, Op.READ, "g")
    lenient = StandardAuthorizer(str(tmp_path / "other.json"), [], allow_if_no_acl=True)
    assert ok(lenient, ALICE, Op.READ, "g")
    lenient.create([acl("g", principal="User:bob")])
    assert not ok(lenient, ALICE, Op.READ, "g"), "an ACL on the resource for someone else: no default"
    assert ok(lenient, ALICE, Op.READ, "other")


def test_super_users_bypass_everything(authz):
    authz.create([acl("g", op=Op.ALL, perm=Perm.DENY, principal="User:*")])
    assert ok(authz, user("root"), Op.DELETE, "g")
    assert not ok(authz, ALICE, Op.READ, "g")


def test_literal_prefixed_and_wildcard_patterns(authz):
    authz.create([acl("orders", res=Res.TOPIC), acl("app-", pattern=Pat.PREFIXED), acl("*", op=Op.DESCRIBE)])
    assert ok(authz, ALICE, Op.READ, "orders", Res.TOPIC)
    assert not ok(authz, ALICE, Op.READ, "orders2", Res.TOPIC)
    assert ok(authz, ALICE, Op.READ, "app-1") and ok(authz, ALICE, Op.READ, "app-")
    assert not ok(authz, ALICE, Op.READ, "ap")
    assert ok(authz, ALICE, Op.DESCRIBE, "anything-at-all")
    assert not ok(authz, ALICE, Op.READ, "anything-at-all")


def test_deny_wins_over_allow(authz):
    authz.create([acl("app-", pattern=Pat.PREFIXED, op=Op.ALL), acl("app-secret", perm=Perm.DENY)])
    assert ok(authz, ALICE, Op.READ, "app-public")
    assert not ok(authz, ALICE, Op.READ, "app-secret")
    assert ok(authz, ALICE, Op.DELETE, "app-secret"), "the DENY is for READ only"


def test_allow_read_implies_describe_but_deny_read_does_not_deny_describe(authz):
    authz.create([acl("g"), acl("h", op=Op.DESCRIBE), acl("h", perm=Perm.DENY)])
    assert ok(authz, ALICE, Op.DESCRIBE, "g")
    assert not ok(authz, ALICE, Op.DELETE, "g")
    assert ok(authz, ALICE, Op.DESCRIBE, "h") and not ok(authz, ALICE, Op.READ, "h")
    authz.create([acl("c", op=Op.ALTER_CONFIGS, res=Res.TOPIC)])
    assert ok(authz, ALICE, Op.DESCRIBE_CONFIGS, "c", Res.TOPIC)


def test_principal_wildcard_and_hosts(authz):
    authz.create([acl("g", principal="User:*"), acl("h", host="10.0.0.9")])
    assert ok(authz, BOB, Op.READ, "g")
    assert not ok(authz, ALICE, Op.READ, "h")
    assert ok(authz, ALICE, Op.READ, "h", host="10.0.0.9")


def test_authorized_operations_bits(authz):
    authz.create([acl("g"), acl("g", op=Op.DELETE)])
    bits = authz.authorized_operations(ALICE, HOST, Res.GROUP, "g")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.DELETE)


def test_acls_survive_a_restart_and_filters_delete(tmp_path, authz):
    authz.create([acl("g"), acl("app-", pattern=Pat.PREFIXED), acl("t", res=Res.TOPIC)])
    again = StandardAuthorizer(authz.path, [], False)
    assert set(again.acls) == set(authz.acls)
    match_app1 = AclBindingFilter(Res.GROUP, "app-1", Pat.MATCH, None, None, Op.ANY, Perm.ANY)
    assert again.describe(match_app1) == [acl("app-", pattern=Pat.PREFIXED)]
    removed = again.delete([AclBindingFilter(Res.ANY, None, Pat.ANY, "User:alice", None, Op.READ, Perm.ALLOW)])
    assert len(removed[0]) == 3 and StandardAuthorizer(authz.path, [], False).acls == []
