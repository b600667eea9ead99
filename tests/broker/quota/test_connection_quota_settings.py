"""The connection-quota broker settings: Kafka's names, defaults and validation, statically and as dynamic
broker configs.

Kafka's side: server/src/main/java/org/apache/kafka/network/SocketServerConfigs.java (the four settings: INT,
default Integer.MAX_VALUE, atLeast(0); the overrides a STRING parsed as host:count), core/.../KafkaConfig.scala
validateValues (max.connections.per.ip 0 only with overrides; override hosts must match Utils.validHostPattern),
server-common/.../util/Csv.parseCsvMap (the count after the last colon), SocketServer.ReconfigurableConfigs
(dynamic) and ListenerReconfigurableConfigs (listener.name.<l>.max.connections, .max.connection.creation.rate).
"""
from __future__ import annotations

import pytest

from kcoord.broker.config import PROPERTIES, BrokerConfig, ConfigError
from kcoord.metadata.dynamic_broker_configs import ConfigRefused, DynamicBrokerConfigs, config_text

MAX = 2**31 - 1
KEYS = ("max.connections", "max.connection.creation.rate", "max.connections.per.ip")


def test_defaults_are_kafkas():
    cfg = BrokerConfig()
    assert [cfg.get(k) for k in KEYS] == [MAX] * 3
    assert cfg.get("max.connections.per.ip.overrides") == {}


def test_overrides_parse_as_kafkas_csv_map():
    cfg = BrokerConfig({"max.connections.per.ip.overrides": "hostName:100, 127.0.0.1:200,::1:5",
                        "max.connections.per.ip": "0"})
    assert cfg.get("max.connections.per.ip.overrides") == {"hostName": 100, "127.0.0.1": 200, "::1": 5}
    assert config_text(cfg.get("max.connections.per.ip.overrides")) == "hostName:100,127.0.0.1:200,::1:5"


@pytest.mark.parametrize(("raw", "key"), [
    ({"max.connections": "-1"}, "max.connections"),
    ({"max.connection.creation.rate": "fast"}, "max.connection.creation.rate"),
    ({"max.connections.per.ip": "2147483648"}, "max.connections.per.ip"),
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip"),               # 0 only with overrides
    ({"max.connections.per.ip.overrides": "10.0.0.1"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "10.0.0.1:x"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "bad host!:3"}, "max.connections.per.ip.overrides"),
    ({"listener.name.plaintext.max.connections": "-5"}, "listener.name.plaintext.max.connections"),
    ({"listener.name.plaintext.max.connection.creation.rate": "x"},
     "listener.name.plaintext.max.connection.creation.rate"),
])
def test_a_bad_value_stops_the_broker_naming_the_key(raw, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        BrokerConfig(raw)


def test_listener_prefixed_limits_are_accepted():
    cfg = BrokerConfig({"listener.name.plaintext.max.connections": "10",
                        "listener.name.plaintext.max.connection.creation.rate": "5"})
    assert cfg.per_listener["listener.name.plaintext.max.connections"] == "10"


def test_the_four_settings_are_dynamic_and_validated(tmp_path):
    cfg = BrokerConfig({"log.dirs": str(tmp_path)})
    dynamic = DynamicBrokerConfigs(str(tmp_path), cfg, 1, PROPERTIES)
    dynamic.replace("", {"max.connections": "100", "max.connections.per.ip.overrides": "127.0.0.1:2"})
    dynamic.replace("1", {"max.connection.creation.rate": "7"})
    assert cfg.get("max.connections") == 100 and cfg.get("max.connection.creation.rate") == 7
    assert cfg.get("max.connections.per.ip.overrides") == {"127.0.0.1": 2}
    dynamic.replace("1", {"max.connections.per.ip": "0"})  # the cluster default has overrides: allowed
    with pytest.raises(ConfigRefused, match="Invalid value -1 for configuration max.connections"):
        dynamic.validate("1", {"max.connections": "-1"})
    dynamic.replace("", {})
    with pytest.raises(ConfigRefused, match="max.connections.per.ip can be set to zero only if"):
        dynamic.validate("1", {"max.connections.per.ip": "0"})
