"""The kcoord.protocol.messages surface other packages rely on (docs/CONTRACTS.md)."""
from __future__ import annotations

import linecache
import traceback

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import DecodeError


def test_api_keys_and_ranges_come_from_the_json():
    assert m.API_KEYS["JoinGroup"] == 11
    assert m.API_KEYS["ApiVersions"] == 18
    assert m.API_KEYS["CreatePartitions"] == 37
    assert m.API_KEYS["SaslAuthenticate"] == 36 and m.API_KEYS["AlterUserScramCredentials"] == 51
    # a codec for every API the registry serves, and none for an API it does not
    from kcoord.broker import registry
    assert set(m.API_KEYS) == set(m.SERVED_APIS) == {spec.name for spec in registry.served()}
    assert m.API_KEYS["ConsumerGroupHeartbeat"] == 68  # from protocol/extra_definitions.py
    assert m.api_versions_range(11) == (0, 9)
    assert m.api_versions_range(8)[0] == 2


def test_codecs_are_cached_and_refuse_unknown_versions():
    assert m.request_codec(12, 4) is m.request_codec(12, 4)
    with pytest.raises(ValueError):
        m.request_codec(12, 99)
    with pytest.raises(KeyError):
        m.request_codec(9999, 0)


def test_classes_are_shared_by_versions_with_nested_struct_attributes():
    resp = m.JoinGroupResponse(error_code=0, members=[m.JoinGroupResponse.JoinGroupResponseMember(
        member_id="a", metadata=b"x")])
    for version in (0, 5, 9):
        codec = m.response_codec(11, version)
        assert codec.message_class is m.JoinGroupResponse
        obj, end = codec.decode(codec.encode(resp))
        assert obj.members[0].member_id == "a"
    assert m.OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition is \
        m.OffsetCommitRequest.OffsetCommitRequestPartition


def test_constructor_defaults_equality_and_repr():
    a = m.HeartbeatResponse()
    assert a.error_code == 0 and a.throttle_time_ms == 0
    assert m.JoinGroupRequest().rebalance_timeout_ms == -1     # JSON default "-1"
    assert m.JoinGroupRequest().protocols == [] and m.JoinGroupRequest().protocols is not \
        m.JoinGroupRequest().protocols
    assert m.HeartbeatResponse(error_code=27) == m.HeartbeatResponse(error_code=27)
    assert m.HeartbeatResponse(error_code=27) != m.HeartbeatResponse(error_code=0)
    assert repr(m.HeartbeatResponse(error_code=27)) == "HeartbeatResponse(throttle_time_ms=0, error_code=27)"
    assert not hasattr(a, "__dict__")
    with pytest.raises(TypeError):
        m.HeartbeatResponse(no_such_field=1)


def test_decode_error_names_api_version_and_offset():
    codec = m.request_codec(12, 4)
    good = codec.encode(m.HeartbeatRequest(group_id="group", generation_id=1, member_id="m"))
    with pytest.raises(DecodeError) as info:
        codec.decode(good[:8])
    err = info.value
    assert (err.api, err.version) == ("HeartbeatRequest", 4)
    assert err.offset == 6      # compact "group" takes bytes 0-5; generation_id is cut short
    assert "HeartbeatRequest v4" in str(err)


def test_generated_source_is_in_linecache_and_tracebacks():
    codec = m.request_codec(11, 5)
    with pytest.raises(DecodeError) as info:
        codec.decode(b"\x00\x01g")
    text = "".join(traceback.format_exception(info.value.__cause__))
    assert "<kcoord-codegen JoinGroupRequest v5>" in text
    assert "_U_ii(buf, pos)" in text    # the generated line itself is shown
    assert linecache.getline("<kcoord-codegen JoinGroupRequest v5>", 1).startswith("# JoinGroupRequest v5")


def test_versioned_consumer_protocol_data():
    sub = m.ConsumerProtocolSubscription(topics=["a", "b"], user_data=None)
    raw = m.encode_versioned("ConsumerProtocolSubscription", sub, 1)
    assert raw[:2] == b"\x00\x01"
    back, version = m.decode_versioned("ConsumerProtocolSubscription", raw)
    assert version == 1 and back.topics == ["a", "b"] and back.user_data is None
    # A newer version than we know is read with our newest layout (fields are only appended).
    newer = b"\x00\x63" + raw[2:] + b"\x00\x00\x00\x07" + b"\xff\xff"
    back, version = m.decode_versioned("ConsumerProtocolSubscription", newer)
    assert version == m.codec("ConsumerProtocolSubscription", 3).version
    assert back.generation_id == 7


def test_decode_takes_the_offset_by_keyword_and_any_bytes_like():
    codec = m.codec("HeartbeatRequest", 4)
    body = codec.encode(m.HeartbeatRequest(group_id="g", member_id="m"))
    framed = b"head" + body
    expected = (m.HeartbeatRequest(group_id="g", member_id="m"), len(framed))
    assert codec.decode(framed, offset=4) == expected
    assert codec.decode(bytearray(framed), 4) == expected
    assert codec.decode(memoryview(framed), offset=4) == expected
