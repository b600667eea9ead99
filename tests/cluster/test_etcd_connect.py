"""kcoord.etcd.connect, parsed as zookeeper.connect is (HOST:PORT[,HOST:PORT...][/PREFIX])."""
import pytest

from kcoord.broker.config import BrokerConfig, ConfigError
from kcoord.cluster.etcd_connect import EtcdConnect, grpc_target, parse_etcd_connect


@pytest.mark.parametrize("raw, endpoints, prefix", [
    ("127.0.0.1:2379", [("127.0.0.1", 2379)], "/kcoord"),
    (" etcd-1.example.com:2379,etcd-2.example.com:22379/kc/prod ",
     [("etcd-1.example.com", 2379), ("etcd-2.example.com", 22379)], "/kc/prod"),
    ("etcd", [("etcd", 2379)], "/kcoord"),  # etcd's client port, as ZooKeeper fills in 2181
    ("[::1]:2379,[fe80::1]/a_b.c-d", [("::1", 2379), ("fe80::1", 2379)], "/a_b.c-d"),
])
def test_parses_endpoints_and_prefix(raw, endpoints, prefix):
    connect = parse_etcd_connect(raw)
    assert connect == EtcdConnect(tuple(endpoints), prefix)
    assert connect.namespace == prefix + "/"
    assert parse_etcd_connect(str(connect)) == connect


@pytest.mark.parametrize("raw", [None, "", "   "])
def test_empty_is_single_node(raw):
    assert parse_etcd_connect(raw) is None


@pytest.mark.parametrize("raw, says", [
    ("http://127.0.0.1:2379", "without a scheme"),
    ("127.0.0.1:2379,", "empty endpoint"),
    ("127.0.0.1:0", "port"),
    ("127.0.0.1:65536", "port"),
    ("127.0.0.1:x", "port"),
    ("::1:2379", "brackets"),
    ("[::1", r"not \[IPV6\]:PORT"),
    ("[nothost]:2379", "not an IPv6 address"),
    ("bad_host:2379", "not a host name"),
    ("a:1,a:1", "twice"),
    ("a:1/", "prefix"),
    ("a:1/kc/", "prefix"),
    ("a:1/kc//x", "prefix"),
    ("a:1/kc/..", "prefix"),
    ("a:1/k c", "prefix"),
])
def test_malformed_values_say_what_is_wrong(raw, says):
    with pytest.raises(ValueError, match=says):
        parse_etcd_connect(raw)


def test_the_broker_config_declares_it_and_names_the_key():
    assert BrokerConfig({}).get("kcoord.etcd.connect") is None  # the default: a cluster of one
    assert BrokerConfig({"kcoord.etcd.connect": "10.0.0.1:2379/kc"}).get("kcoord.etcd.connect") == \
        EtcdConnect((("10.0.0.1", 2379),), "/kc")
    with pytest.raises(ConfigError, match="'kcoord.etcd.connect'.*port"):
        BrokerConfig({"kcoord.etcd.connect": "10.0.0.1:99999"})


@pytest.mark.parametrize("endpoints, target", [
    ([("etcd", 2379)], "etcd:2379"),
    ([("::1", 2379)], "[::1]:2379"),
    ([("10.0.0.1", 2379), ("10.0.0.2", 22379)], "ipv4:10.0.0.1:2379,10.0.0.2:22379"),
    ([("::1", 1), ("::2", 2)], "ipv6:[::1]:1,[::2]:2"),
    ([("etcd-1", 2379), ("10.0.0.2", 2379)], None),  # resolved when connecting
    ([("::1", 1), ("10.0.0.2", 2)], None),
])
def test_grpc_target(endpoints, target):
    assert grpc_target(tuple(endpoints)) == target
