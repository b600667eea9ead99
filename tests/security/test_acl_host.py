"""CIDR host patterns in ACLs (KIP-1276), pure: which hosts CreateAcls accepts and how the authorizer
matches a client's address against a binding's host. Kafka's rules: AclControlManager.validateHostPattern
(metadata/src/main/java/org/apache/kafka/controller/AclControlManager.java), CidrUtils.validate /
isInRange (metadata/src/main/java/org/apache/kafka/metadata/authorizer/CidrUtils.java), the host check of
StandardAuthorizerData.findResult, and AccessControlEntryFilter.matches for DescribeAcls / DeleteAcls."""
from __future__ import annotations

import pytest

from kcoord.broker.security.acl import AclBinding, AclBindingFilter, validate
from kcoord.broker.security.acl import AclOperation as Op
from kcoord.broker.security.acl import AclPermissionType as Perm
from kcoord.broker.security.acl import PatternType as Pat
from kcoord.broker.security.acl import ResourceType as Res
from kcoord.broker.security.acl_host import host_matches, host_refusal
from kcoord.broker.security.authorizer import StandardAuthorizer
from kcoord.broker.security.principal import user


@pytest.mark.parametrize(("pattern", "client", "expected"), [
    ("10.0.0.0/8", "10.200.3.4", True),
    ("10.0.0.0/8", "11.0.0.1", False),
    ("192.168.1.0/24", "192.168.1.0", True),      # the network address is in the block (inclusive)
    ("192.168.1.0/24", "192.168.1.255", True),    # and the broadcast address
    ("192.168.1.128/25", "192.168.1.127", False),
    ("10.1.2.3/8", "10.9.9.9", True),             # host bits right of the prefix are ignored
    ("0.0.0.0/0", "203.0.113.7", True),
    ("127.0.0.1/32", "127.0.0.1", True),
    ("127.0.0.1/32", "127.0.0.2", False),
    ("2001:db8::/32", "2001:db8:ffff::1", True),
    ("2001:db8::/32", "2001:db9::1", False),
    ("::/0", "::1", True),
    ("::1/128", "0:0:0:0:0:0:0:1", True),         # the address, however it is written
    ("::/0", "127.0.0.1", False),                 # an IPv6 block never holds an IPv4 address
    ("0.0.0.0/0", "::1", False),                  # nor an IPv4 block an IPv6 one
    ("127.0.0.0/8", "::ffff:127.0.0.1", True),    # an IPv4-mapped peer is its IPv4 address
    ("127.0.0.0/8", "not-an-address", False),
])
def test_cidr_blocks_hold_the_addresses_inside_them(pattern, client, expected):
    assert host_matches(pattern, client) is expected


def test_wildcard_and_exact_hosts_as_before():
    assert host_matches("*", "10.0.0.5") and host_matches("*", "::1")
    assert host_matches("10.0.0.5", "10.0.0.5")
    assert not host_matches("10.0.0.5", "10.0.0.6")
    assert not host_matches("10.0.0", "10.0.0.5"), "no slash: an exact host, never a prefix"
    assert not host_matches("broker.example.com", "10.0.0.5"), "a name is never resolved"


@pytest.mark.parametrize("host", ["*", "10.0.0.1", "2001:db8::1", "example.com", "10.0.0.0/8", "10.1.2.3/8",
                                  "0.0.0.0/0", "::/0", "2001:db8::/32", "::1/128"])
def test_create_acls_accepts(host):
    assert host_refusal(host) is None


@pytest.mark.parametrize("host", ["192.168.0.0/33", "::/129", "example.com/test", "10.0.0.0/", "10.0.0.0/-1",
                                  "10.0.0.0/255.0.0.0", "10.0.0/8", "/8", "10.0.0.0/8/8", "300.0.0.0/8"])
def test_create_acls_refuses_what_is_no_cidr_block(host):
    reason = host_refusal(host)
    assert reason is not None and reason.startswith("Invalid CIDR notation"), reason


def test_an_empty_host_is_refused():
    assert host_refusal("") == "Host should not be empty"


def _binding(host: str) -> AclBinding:
    return AclBinding(Res.TOPIC, "orders", Pat.LITERAL, "User:alice", host, Op.READ, Perm.ALLOW)


def test_validate_new_acl_checks_the_host():
    assert validate(_binding("10.0.0.0/8")) is None
    assert (validate(_binding("10.0.0.0/40")) or "").startswith("Invalid CIDR notation")


def test_describe_and_delete_filters_compare_the_host_literally():
    cidr = _binding("10.0.0.0/8")

    def flt(host):
        return AclBindingFilter(Res.ANY, None, Pat.ANY, None, host, Op.ANY, Perm.ANY)

    assert flt("10.0.0.0/8").matches(cidr)
    assert flt(None).matches(cidr)
    assert not flt("10.0.0.1").matches(cidr), "a filter's host is no address to look up in blocks"
    assert not flt("10.0.0.0/16").matches(cidr)


def test_authorizer_allows_from_inside_the_block_only(tmp_path):
    authz = StandardAuthorizer(str(tmp_path / "acls.json"), [], allow_if_no_acl=False)
    authz.create([_binding("127.0.0.0/8"),
                  AclBinding(Res.TOPIC, "audit", Pat.LITERAL, "User:alice", "10.0.0.0/8", Op.READ, Perm.ALLOW)])
    alice = user("alice")
    assert authz.authorize(alice, "127.0.0.1", Op.READ, Res.TOPIC, "orders")
    assert authz.authorize(alice, "127.9.8.7", Op.DESCRIBE, Res.TOPIC, "orders"), "READ implies DESCRIBE"
    assert not authz.authorize(alice, "10.0.0.1", Op.READ, Res.TOPIC, "orders")
    assert authz.authorize(alice, "10.3.2.1", Op.READ, Res.TOPIC, "audit")
    assert not authz.authorize(alice, "127.0.0.1", Op.READ, Res.TOPIC, "audit")


def test_a_deny_for_a_narrower_block_wins_inside_it(tmp_path):
    authz = StandardAuthorizer(str(tmp_path / "acls.json"), [], allow_if_no_acl=False)
    authz.create([_binding("192.168.1.0/24"),
                  AclBinding(Res.TOPIC, "orders", Pat.LITERAL, "User:alice", "192.168.1.128/25", Op.READ, Perm.DENY)])
    alice = user("alice")
    assert authz.authorize(alice, "192.168.1.10", Op.READ, Res.TOPIC, "orders")
    assert not authz.authorize(alice, "192.168.1.200", Op.READ, Res.TOPIC, "orders")
