"""`kcoord.etcd.connect`: which etcd a node uses and which cluster in it, modelled on `zookeeper.connect`.

    HOST:PORT[,HOST:PORT...][/PREFIX]

Every endpoint is a member of one etcd cluster (the client fails over between them); a missing port is
etcd's client port 2379, as ZooKeeper's client fills in 2181. The prefix is ZooKeeper's chroot: the
keys of one kcoord cluster live under it, so several kcoord clusters can share one etcd. Without it,
`/kcoord`. An empty value means no etcd: the node is a cluster of one.

Pure: no gRPC here, so the broker's config table can check the value without loading the client.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import re

DEFAULT_PORT = 2379
DEFAULT_PREFIX = "/kcoord"
FORMAT = "HOST:PORT[,HOST:PORT...][/PREFIX]"
_HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\Z")
_SEGMENT = re.compile(r"[A-Za-z0-9_.-]+\Z")


@dataclasses.dataclass(frozen=True)
class EtcdConnect:
    endpoints: tuple[tuple[str, int], ...]  # (host, port); an IPv6 host without brackets
    prefix: str                             # "/kcoord": keys are "<prefix>/<key>"

    @property
    def namespace(self) -> str:
        return self.prefix + "/"

    def __str__(self) -> str:  # the value written back (kcoord config, DescribeConfigs)
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.endpoints)
        return hosts + self.prefix


def parse_etcd_connect(raw: str | None) -> EtcdConnect | None:
    """The value of kcoord.etcd.connect, or ValueError saying what is wrong (the config layer adds the
    key's name). None for an empty value: single-node mode."""
    text = (raw or "").strip()
    if not text:
        return None
    if "://" in text:
        raise ValueError(f"expected {FORMAT} without a scheme, got {raw!r}")
    hosts, slash, path = text.partition("/")
    prefix = _prefix("/" + path) if slash else DEFAULT_PREFIX
    endpoints = tuple(_endpoint(item.strip(), raw) for item in hosts.split(","))
    if len(set(endpoints)) != len(endpoints):
        raise ValueError(f"an endpoint is listed twice in {raw!r}")
    return EtcdConnect(endpoints, prefix)


def _endpoint(item: str, raw: str | None) -> tuple[str, int]:
    if not item:
        raise ValueError(f"expected {FORMAT}, got an empty endpoint in {raw!r}")
    if item.startswith("["):  # [IPv6]:PORT or [IPv6]
        host, bracket, rest = item[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"endpoint {item!r} is not [IPV6]:PORT")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"endpoint {item!r}: {host!r} is not an IPv6 address") from None
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text_or_empty = item.partition(":")
        if ":" in port_text_or_empty:
            raise ValueError(f"endpoint {item!r}: write an IPv6 address in brackets, [ADDRESS]:PORT")
        if not _HOSTNAME.match(host):
            raise ValueError(f"endpoint {item!r}: {host!r} is not a host name or address")
        port_text = port_text_or_empty if colon else None
    if port_text is None:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"endpoint {item!r}: the port must be 1-65535")
    return host, int(port_text)


def _prefix(path: str) -> str:
    segments = path.split("/")[1:]
    if path.endswith("/") or not all(_SEGMENT.match(s) and s not in (".", "..") for s in segments):
        raise ValueError(f"prefix {path!r} must be /NAME[/NAME...] of letters, digits, '.', '_', '-' "
                         "(no empty segment, no trailing '/')")
    return path


def grpc_target(endpoints: tuple[tuple[str, int], ...]) -> str | None:
    """The gRPC target that reaches every endpoint: one endpoint as itself (gRPC resolves a name), several
    IP addresses as a multi-address target (`ipv4:a:1,b:2`; gRPC's pick_first moves to the next one
    when its member goes away). None when several endpoints include host names: they are resolved when
    connecting (kcoord.cluster.etcd_store)."""
    if len(endpoints) == 1:
        host, port = endpoints[0]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    versions = set()
    for host, _ in endpoints:
        try:
            versions.add(ipaddress.ip_address(host).version)
        except ValueError:
            return None
    if versions == {4}:
        return "ipv4:" + ",".join(f"{h}:{p}" for h, p in endpoints)
    if versions == {6}:
        return "ipv6:" + ",".join(f"[{h}]:{p}" for h, p in endpoints)
    return None
