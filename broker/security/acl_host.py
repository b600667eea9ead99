"""An ACL binding's host: "*" (any client), an exact host string, or a CIDR block (KIP-1276), and how
the authorizer matches a client's address against it. Pure: no sockets, no name resolution.

Kafka (AclControlManager.validateHostPattern, CidrUtils, KAFKA-20088):
  - CreateAcls: an empty host is INVALID_REQUEST; a host without "/" is kept as written (an IP address or
    a name; a name never matches, since the authorizer compares against the client's address); a host with
    "/" must be a CIDR block, IPv4 "a.b.c.d/0..32" or IPv6 "x::/0..128", else INVALID_REQUEST "Invalid CIDR
    notation ...". Host bits right of the prefix are allowed: 10.1.2.3/8 is the block 10.0.0.0/8, as
    commons-net's SubnetUtils reads it; the binding keeps the text the client sent.
  - Authorization: "*" matches every client; otherwise the host equal to the client's address string, or a
    CIDR block holding the client's address (network and broadcast addresses included). An IPv4 block never
    holds an IPv6 address and the other way round; an IPv4-mapped IPv6 peer (::ffff:a.b.c.d, what a
    dual-stack socket reports) is its IPv4 address, as Java's InetAddress presents it.
  - DescribeAcls / DeleteAcls filters compare the host literally (AccessControlEntryFilter.matches): the
    filter "10.0.0.1" does not find the binding "10.0.0.0/8"; the filter "10.0.0.0/8" does.
  - Kafka 4.4 accepts a CIDR host only from metadata.version 4.4-IV1 (level 32) and answers
    UNSUPPORTED_VERSION below it, so that no broker of an older release, during a rolling upgrade, meets a
    binding it would read as a literal host. kcoord accepts CIDR hosts at any metadata.version: every node
    of a kcoord cluster runs the same matching code, so the hazard the gate guards against cannot arise.
"""
from __future__ import annotations

import ipaddress
from functools import lru_cache

ANY_HOST = "*"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class InvalidCidr(ValueError):
    """A host with "/" that is no CIDR block (CreateAcls answers INVALID_REQUEST with its message)."""


def is_cidr(host: str) -> bool:
    return "/" in host


@lru_cache(maxsize=4096)
def parse_cidr(host: str) -> Network:
    """The block a CIDR host names; InvalidCidr if it names none. Cached: the authorizer asks per request."""
    address, _, prefix = host.partition("/")
    # the prefix is a length only: no netmask ("/255.0.0.0") or sign, as SubnetUtils' pattern allows none
    if not prefix.isdigit() or not prefix.isascii():
        raise InvalidCidr(f"Invalid CIDR notation '{host}': the prefix length must be a decimal number")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise InvalidCidr(f"Invalid CIDR notation '{host}': '{address}' is not an IP address") from None
    if int(prefix) > ip.max_prefixlen:
        raise InvalidCidr(f"Invalid CIDR notation '{host}': the prefix length of an IPv{ip.version} block "
                          f"is at most {ip.max_prefixlen}")
    return ipaddress.ip_network(f"{ip}/{int(prefix)}", strict=False)


def host_refusal(host: str) -> str | None:
    """Why CreateAcls refuses `host` (INVALID_REQUEST), or None."""
    if not host:
        return "Host should not be empty"
    if is_cidr(host):
        try:
            parse_cidr(host)
        except InvalidCidr as exc:
            return str(exc)
    return None


@lru_cache(maxsize=4096)
def _client_address(client_host: str) -> Address | None:
    try:
        ip = ipaddress.ip_address(client_host)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def host_matches(pattern: str, client_host: str) -> bool:
    """Whether a binding's host `pattern` applies to a client connected from `client_host`."""
    if pattern == ANY_HOST or pattern == client_host:
        return True
    if not is_cidr(pattern):
        return False
    try:
        block = parse_cidr(pattern)
    except InvalidCidr:
        return False  # stored before validation existed: it matches no one (CidrUtils.isInRange)
    ip = _client_address(client_host)
    return ip is not None and ip.version == block.version and ip in block
