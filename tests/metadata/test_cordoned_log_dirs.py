"""cordoned.log.dirs (KIP-1066), pure: which values a broker accepts and which directories they cordon, as
Kafka 4.3 (core's CordonedLogDirsIntegrationTest: "*" or entries of log.dirs; nothing cordoned below
metadata.version 4.3-IV0)."""
from __future__ import annotations

import os

import pytest

from kcoord.broker.config import BrokerConfig, ConfigError
from kcoord.metadata.cordoned_log_dirs import is_cordoned, refusal

DIRS = ["/data/a", "/data/b"]


def test_entries_of_log_dirs_or_star_alone_are_accepted():
    assert refusal([], DIRS) is None
    assert refusal(["*"], DIRS) is None
    assert refusal(["/data/b"], DIRS) is None
    assert refusal(["/data/a", "/data/b/"], DIRS) is None, "the same directory, however written"


def test_other_directories_and_star_among_others_are_refused():
    assert "/elsewhere not in log.dirs" in (refusal(["/data/a", "/elsewhere"], DIRS) or "")
    assert "must be the only entry" in (refusal(["*", "/data/a"], DIRS) or "")


def test_a_relative_log_dir_and_its_absolute_path_name_one_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert refusal([str(tmp_path / "data")], ["data"]) is None  # Kafka 4.3.1 refuses this: KAFKA-20901
    assert is_cordoned(os.path.abspath("data"), ["data"], supported=True)


def test_cordoned_only_when_listed_and_the_metadata_version_supports_it():
    assert is_cordoned("/data/a", ["*"], supported=True)
    assert is_cordoned("/data/a", ["/data/a"], supported=True)
    assert not is_cordoned("/data/b", ["/data/a"], supported=True)
    assert not is_cordoned("/data/a", [], supported=True)
    assert not is_cordoned("/data/a", ["*"], supported=False), "below 4.3-IV0 the setting has no effect"


def test_a_broker_with_an_invalid_static_value_does_not_start():
    with pytest.raises(ConfigError, match="/x not in log.dirs"):
        BrokerConfig({"log.dirs": "/data/a", "cordoned.log.dirs": "/x"})
    assert BrokerConfig({"log.dirs": "/data/a", "cordoned.log.dirs": "*"}).get("cordoned.log.dirs") == ["*"]
