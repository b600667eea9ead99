"""Configuration under Kafka property names, and the `kcoord` command line."""
import os
import subprocess
import sys

import pytest

from kcoord.broker.config import BrokerConfig, ConfigError, Listener, parse_listeners, read_properties_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kcoord(*args, timeout=30):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "kcoord.tools", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_embedded_defaults_are_kafkas():
    cfg = BrokerConfig()
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.advertised_listeners == cfg.listeners
    assert cfg.log_dirs == ["./data"]
    assert cfg.get("group.initial.rebalance.delay.ms") == 3000
    assert cfg.get("group.min.session.timeout.ms") == 6000
    assert cfg.get("group.max.session.timeout.ms") == 1_800_000
    assert cfg.get("group.max.size") == 2**31 - 1
    assert cfg.get("offsets.topic.num.partitions") == 50
    assert cfg.get("offsets.retention.minutes") == 10080
    assert cfg.get("offset.metadata.max.bytes") == 4096
    assert cfg.log_retention_ms == 168 * 3_600_000


def test_file_then_overrides(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(
        "# a comment\n! another\nlisteners=PLAINTEXT://:19092\nbroker.id = 7\n"
        "log.dirs=/tmp/a,/tmp/b\nnum.network.threads=3\ngroup.max.size: 10\n"
        "log.retention.minutes=\\\n  5\n")
    cfg = BrokerConfig.load(props, {"group.max.size": "20"})
    assert cfg.listeners == [Listener("PLAINTEXT", "0.0.0.0", 19092)]
    assert cfg.node_id == 7
    assert cfg.log_dirs == ["/tmp/a", "/tmp/b"]
    assert cfg.get("group.max.size") == 20
    assert cfg.log_retention_ms == 5 * 60_000
    assert cfg.ignored == ["num.network.threads"]


@pytest.mark.parametrize("raw, key", [
    ({"no.such.property": "1"}, "no.such.property"),
    ({"group.max.size": "many"}, "group.max.size"),
    ({"group.max.size": "0"}, "group.max.size"),
    ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
    ({"listeners": "localhost:9092"}, "listeners"),
    ({"listeners": "SSL://:9093"}, "ssl.keystore.location"),
    ({"log.message.timestamp.type": "Wallclock"}, "log.message.timestamp.type"),
    # consumer groups (KIP-848), Kafka's GroupCoordinatorConfig bounds
    ({"group.consumer.session.timeout.ms": "6000"}, "group.consumer.session.timeout.ms"),
    ({"group.consumer.heartbeat.interval.ms": "20000"}, "group.consumer.heartbeat.interval.ms"),
    ({"group.consumer.heartbeat.interval.ms": "50000", "group.consumer.max.heartbeat.interval.ms": "60000"},
     "group.consumer.heartbeat.interval.ms"),
    ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors"),
    ({"group.consumer.migration.policy": "sideways"}, "group.consumer.migration.policy"),
])
def test_bad_properties_name_the_key(raw, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        BrokerConfig(raw)


def test_consumer_group_assignors_accept_kafkas_class_names():
    cfg = BrokerConfig({"group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform"})
    assert cfg.get("group.consumer.assignors") == ["range", "uniform"]


def test_listener_forms():
    assert parse_listeners("PLAINTEXT://[::1]:0,INTERNAL://127.0.0.2:9093") == [
        Listener("PLAINTEXT", "::1", 0), Listener("INTERNAL", "127.0.0.2", 9093)]
    assert str(Listener("PLAINTEXT", "::1", 9092)) == "PLAINTEXT://[::1]:9092"


def test_properties_file_rejects_garbage_line(tmp_path):
    props = tmp_path / "bad.properties"
    props.write_text("listeners=PLAINTEXT://:9092\njust-a-word\n")
    with pytest.raises(ConfigError, match="bad.properties:2"):
        read_properties_file(props)


def test_help_explains_each_subcommand():
    out = kcoord("--help")
    assert out.returncode == 0
    for sub in ("serve", "config", "groups", "analyze"):
        assert sub in out.stdout
    serve = kcoord("serve", "--help")
    assert "--override" in serve.stdout and "listeners" in serve.stdout


def test_cli_config_error_is_one_clear_line_not_a_traceback(tmp_path):
    out = kcoord("serve", "--override", "group.max.size=lots")
    assert out.returncode == 2
    assert "group.max.size" in out.stderr
    assert "Traceback" not in out.stderr
    missing = kcoord("serve", str(tmp_path / "nope.properties"))
    assert missing.returncode == 2 and "nope.properties" in missing.stderr


def test_cli_config_prints_effective_values():
    out = kcoord("config", "--override", "num.partitions=6")
    assert out.returncode == 0
    assert any(line.startswith("num.partitions=6 ") for line in out.stdout.splitlines())
