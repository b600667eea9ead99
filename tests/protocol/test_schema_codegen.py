"""The pure parts: JSON definitions -> field tree -> generated source."""
from __future__ import annotations

import pytest

from kcoord.protocol import codegen
from kcoord.protocol.schema import NO_VERSIONS, ZERO_UUID, load_spec, parse_versions, snake_case


@pytest.mark.parametrize(("text", "expected"), [
    ("3+", (3, 0x7FFF)), ("1-4", (1, 4)), ("2", (2, 2)), ("none", NO_VERSIONS), (None, NO_VERSIONS),
])
def test_parse_versions(text, expected):
    assert parse_versions(text) == expected


@pytest.mark.parametrize(("name", "expected"), [
    ("SessionTimeoutMs", "session_timeout_ms"), ("GroupId", "group_id"), ("timeoutMs", "timeout_ms"),
])
def test_snake_case(name, expected):
    assert snake_case(name) == expected


def test_spec_from_the_installed_json():
    spec = load_spec("JoinGroupRequest")
    assert (spec.kind, spec.api_key, spec.valid_versions) == ("request", 11, (0, 9))
    assert spec.is_flexible(6) and not spec.is_flexible(5)
    by_name = {f.name: f for f in spec.fields}
    assert by_name["rebalance_timeout_ms"].versions == (1, 0x7FFF)
    assert by_name["rebalance_timeout_ms"].default_value() == -1
    assert by_name["group_instance_id"].nullable_in(5) and not by_name["group_instance_id"].nullable_in(4)
    assert by_name["protocols"].is_array and by_name["protocols"].is_struct
    assert by_name["protocols"].element_type == "JoinGroupRequestProtocol"


def test_defaults_follow_the_json():
    fields = {f.name: f for f in load_spec("MetadataResponse").fields}
    assert fields["cluster_authorized_operations"].default_value() == -2147483648
    fetch = {f.name: f for f in load_spec("FetchRequest").fields}
    assert fetch["max_bytes"].default_value() == 0x7FFFFFFF          # "0x7fffffff"
    topic = {f.name: f for f in load_spec("MetadataRequest").fields[0].fields}
    assert topic["topic_id"].default_value() == ZERO_UUID


def test_tagged_fields_are_parsed():
    partition = next(f for f in load_spec("FetchResponse").fields[3].fields if f.name == "partitions")
    tagged = {f.name: f.tag for f in partition.fields if f.tag is not None}
    assert tagged == {"diverging_epoch": 0, "current_leader": 1, "snapshot_id": 2}
    assert next(f for f in partition.fields if f.name == "current_leader").tagged_in(12)


def test_consecutive_fixed_fields_become_one_struct_call():
    source, names = codegen.codec_source(load_spec("JoinGroupRequest"), 5)
    assert "o.session_timeout_ms, o.rebalance_timeout_ms, = _U_ii(buf, pos)" in source
    assert "parts.append(_P_ii(o.session_timeout_ms, o.rebalance_timeout_ms))" in source
    assert {"_U_ii", "_P_ii", "C_JoinGroupRequest", "C_JoinGroupRequestProtocol"} <= names


def test_fields_a_version_lacks_take_their_defaults_on_decode():
    source, _ = codegen.codec_source(load_spec("JoinGroupRequest"), 0)
    assert "o.rebalance_timeout_ms = -1" in source        # added in v1
    assert "o.reason = None" in source                     # added in v8


def test_flexible_versions_use_compact_lengths_and_tag_sections():
    flexible, _ = codegen.codec_source(load_spec("HeartbeatRequest"), 4)
    classic, _ = codegen.codec_source(load_spec("HeartbeatRequest"), 3)
    assert "_read_compact_length" in flexible and "if buf[pos]:" in flexible
    assert "_read_compact_length" not in classic and "if buf[pos]:" not in classic


def test_collect_classes_names_struct_types_and_nesting():
    classes = codegen.collect_classes(load_spec("OffsetCommitRequest"))
    assert set(classes) == {"OffsetCommitRequest", "OffsetCommitRequestTopic", "OffsetCommitRequestPartition"}
    assert classes["OffsetCommitRequest"].children == ["OffsetCommitRequestTopic"]
    assert classes["OffsetCommitRequestTopic"].children == ["OffsetCommitRequestPartition"]
    assert "retention_time_ms" in [f.name for f in classes["OffsetCommitRequest"].fields]


def test_class_source_is_plain_python():
    source = codegen.class_source(codegen.collect_classes(load_spec("HeartbeatResponse"))["HeartbeatResponse"])
    assert source.startswith("class HeartbeatResponse:\n")
    assert "__slots__ = ('throttle_time_ms', 'error_code', '_unknown_tagged_fields')" in source
    compile(source, "<test>", "exec")
