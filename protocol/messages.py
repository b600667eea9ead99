"""Generated codecs for every (api, version) kcoord serves, compiled lazily from Kafka's JSON definitions.

    from kcoord.protocol import messages as m
    codec = m.request_codec(11, 5)           # JoinGroup v5
    req, end = codec.decode(frame, hdr.body_offset)
    body = m.response_codec(11, 5).encode(m.JoinGroupResponse(error_code=0, ...))

Classes (`m.JoinGroupRequest`, `m.JoinGroupResponse.JoinGroupResponseMember`, ...) are built on first
access; codecs on first request for their (api, version). Importing this module reads no JSON.
What the broker advertises is decided by its handlers; `api_versions_range` is what the JSON defines.
"""
from __future__ import annotations

import functools
import linecache
import struct
import uuid
from typing import TYPE_CHECKING

from kcoord.protocol import codegen, primitives
from kcoord.protocol.errors import DecodeError
from kcoord.protocol.schema import ZERO_UUID, MessageSpec, load_spec

if TYPE_CHECKING:  # what a type checker sees of the classes built below (kcoord.protocol.stubgen writes it)
    from kcoord.protocol.message_types import *  # noqa: F403

# The APIs kcoord's broker speaks (request and response definitions both exist for each).
SERVED_APIS = (
    "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator",
    "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups", "ApiVersions",
    "CreateTopics", "DeleteTopics", "InitProducerId", "DescribeConfigs", "DeleteGroups", "OffsetDelete",
    "DescribeCluster", "CreatePartitions", "DeleteRecords", "OffsetForLeaderEpoch", "AlterConfigs",
    "IncrementalAlterConfigs", "DescribeLogDirs", "SaslHandshake", "SaslAuthenticate", "CreateAcls", "DescribeAcls",
    "DeleteAcls", "DescribeUserScramCredentials", "AlterUserScramCredentials", "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe", "UpdateFeatures", "ListConfigResources",
    # the cluster's admin surface (issue 26)
    "ElectLeaders", "AlterPartitionReassignments", "ListPartitionReassignments", "DescribeTopicPartitions",
    # transactions (KIP-98)
    "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit",
    "DescribeTransactions", "ListTransactions", "DescribeProducers", "WriteTxnMarkers",
    # share groups' group side (KIP-932, issue 28)
    "ShareGroupHeartbeat", "ShareGroupDescribe",
    # share groups' data plane (KIP-932, issue 28)
    "ShareFetch", "ShareAcknowledge", "DescribeShareGroupOffsets", "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets",
    # the share-state RPCs, partition leader -> share coordinator (KIP-932, KIP-1226)
    "InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState", "DeleteShareGroupState",
    "ReadShareGroupStateSummary",
    # client telemetry (KIP-714) and client quotas (issue 29)
    "GetTelemetrySubscriptions", "PushTelemetry", "DescribeClientQuotas", "AlterClientQuotas",
)
# Non-API "data" messages carried inside group protocol bytes (member metadata / assignment).
DATA_MESSAGES = ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment") + tuple(
    # KIP-848's __consumer_offsets records (kcoord.coordinator.consumer.records)
    f"ConsumerGroup{record}{part}" for record in ("Metadata", "MemberMetadata", "PartitionMetadata",
                                                  "TargetAssignmentMetadata", "TargetAssignmentMember",
                                                  "CurrentMemberAssignment", "RegularExpression")
    for part in ("Key", "Value")) + (
    # KIP-932's __share_group_state records (kcoord.share.records)
    "ShareSnapshotKey", "ShareSnapshotValue", "ShareUpdateKey", "ShareUpdateValue") + tuple(
    # KIP-932's share group records of __consumer_offsets (kcoord.coordinator.share.records)
    f"ShareGroup{record}{part}" for record in ("MemberMetadata", "Metadata", "TargetAssignmentMetadata",
                                               "TargetAssignmentMember", "CurrentMemberAssignment")
    for part in ("Key", "Value"))

_MESSAGE_NAMES = frozenset(
    [a + "Request" for a in SERVED_APIS] + [a + "Response" for a in SERVED_APIS] + list(DATA_MESSAGES)
)


class _Missing:
    """Marks a mutable default not given to a constructor (a fresh [] is made per instance)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "_MISSING"


_MISSING = _Missing()


def _register_source(filename: str, source: str) -> None:
    """Make generated source visible to tracebacks, pdb and inspect."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)


# ---------------------------------------------------------------------------------------------
# Classes
# ---------------------------------------------------------------------------------------------

@functools.cache
def _message_classes(name: str) -> dict[str, type]:
    """All classes of one message (the message class and its struct classes), by class name."""
    spec = load_spec(name)
    specs = codegen.collect_classes(spec)
    namespace: dict[str, object] = {"_MISSING": _MISSING, "_ZERO_UUID": ZERO_UUID, "_UUID": uuid.UUID}
    for cs in specs.values():
        source = codegen.class_source(cs)
        filename = codegen.codegen_filename(f"class {name}.{cs.name}")
        _register_source(filename, source)
        exec(compile(source, filename, "exec"), namespace)
    classes = {cls_name: namespace[cls_name] for cls_name in specs}
    for cs in specs.values():
        cls = classes[cs.name]
        cls.__module__ = __name__
        if cs.name != name:
            cls.__qualname__ = f"{name}.{cs.name}"
        for child in cs.children:
            setattr(cls, child, classes[child])
    top = classes[name]
    for cls_name, cls in classes.items():   # every struct is also reachable from the message class
        if cls_name != name:
            setattr(top, cls_name, cls)
    return classes


def message_class(name: str) -> type:
    if name not in _MESSAGE_NAMES:
        raise KeyError(f"{name} is not a message kcoord serves")
    return _message_classes(name)[name]


def __getattr__(attr: str):
    # Module-level lazy attributes: m.JoinGroupRequest, m.API_KEYS.
    if attr in _MESSAGE_NAMES:
        return message_class(attr)
    if attr == "API_KEYS":
        keys = {api: load_spec(api + "Request").api_key for api in SERVED_APIS}
        globals()["API_KEYS"] = keys
        return keys
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


@functools.cache
def _names_by_key() -> dict[int, str]:
    return {load_spec(api + "Request").api_key: api for api in SERVED_APIS}


def api_name(api_key: int) -> str:
    """"JoinGroup" for 11; KeyError for an API we do not serve."""
    return _names_by_key()[api_key]


def api_versions_range(api_key: int) -> tuple[int, int]:
    """(min, max) versions that Kafka's JSON defines for the API (not what the broker advertises)."""
    spec = load_spec(api_name(api_key) + "Request")
    return spec.valid_versions


def flexible_min_version(api_key: int) -> int | None:
    """First flexible version of the API's requests (None if it has none)."""
    low, high = load_spec(api_name(api_key) + "Request").flexible_versions
    return low if low <= high else None


# ---------------------------------------------------------------------------------------------
# Codecs
# ---------------------------------------------------------------------------------------------

def _failing_offset(exc: BaseException) -> int | None:
    """The `pos` of the innermost generated frame when `exc` was raised (error path only)."""
    tb = exc.__traceback__
    offset = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(codegen.CODEGEN_FILENAME_PREFIX):
            offset = tb.tb_frame.f_locals.get("pos", offset)
        tb = tb.tb_next
    return offset


def _as_bytes(buf) -> bytes:
    """Generated decoders index and slice plain bytes (their fastest path). A view covering a whole
    bytes object (a frame the splitter had to join) is used without copying."""
    inner = getattr(buf, "obj", None)
    return inner if type(inner) is bytes and len(inner) == len(buf) else bytes(buf)


def _decode_failure(exc: Exception, buf: bytes, name: str, version: int) -> tuple[DecodeError, Exception | None]:
    """(the DecodeError to raise, its cause) for anything a generated decoder raised."""
    if isinstance(exc, DecodeError):
        return DecodeError(exc.reason, api=name, version=version, offset=exc.offset), None
    # truncated / garbage input surfacing from struct, indexing, utf-8
    reason = "truncated input" if isinstance(exc, (IndexError, struct.error)) else f"invalid input: {exc}"
    at = _failing_offset(exc)
    if at is not None and at > len(buf):   # an earlier length prefix ran past the end
        at = len(buf)
    return DecodeError(reason, api=name, version=version, offset=at), exc


_RUNTIME = {
    "_new": object.__new__,
    "_read_uvarint": primitives.read_uvarint,
    "_read_compact_length": primitives.read_compact_length,
    "_compact_length": primitives.compact_length,
    "_COMPACT_LENGTHS": primitives.COMPACT_LENGTHS,
    "_LEN16": primitives.LENGTHS_INT16,
    "_LEN32": primitives.LENGTHS_INT32,
    "_read_unknown_tags": primitives.read_unknown_tags,
    "_keep_unknown_tag": primitives.keep_unknown_tag,
    "_encode_tag_section": primitives.encode_tag_section,
    "_null_error": primitives.null_error,
    "_overrun": primitives.overrun,
    "_tag_size_error": primitives.tag_size_error,
    "_past_end": primitives.past_end,
    "_memoryview": memoryview,
    "_as_bytes": _as_bytes,
    "_decode_failure": _decode_failure,
    "_shape": primitives.shape,
    "_STRINGS16": primitives.STRINGS16,
    "_STRINGS_COMPACT": primitives.STRINGS_COMPACT,
    "_string16": primitives.string16,
    "_string_compact": primitives.string_compact,
    "_not_nullable": primitives.not_nullable,
    "_NULL_INT16": primitives.NULL_INT16,
    "_NULL_INT32": primitives.NULL_INT32,
    "_unpack_from": struct.unpack_from,
    "_pack": struct.pack,
    "_UUID": uuid.UUID,
    "_ZERO_UUID": ZERO_UUID,
}


def _resolve(name: str, classes: dict[str, type]) -> object:
    if name in _RUNTIME:
        return _RUNTIME[name]
    if name.startswith("C_"):
        return classes[name[2:]]
    fmt = name[3:].replace("o", "?")
    if name.startswith("_U_"):
        return primitives.fixed_struct(fmt).unpack_from
    if name.startswith("_P_"):
        return primitives.fixed_struct(fmt).pack
    raise KeyError(name)


class Codec:
    """decode(buf, offset=0) -> (obj, end) and encode(obj) -> bytes for one (message, version).

    Both are the generated functions themselves. decode takes bytes, bytearray or memoryview, starts
    at `offset` and returns the offset just past the message; only DecodeError escapes, naming the
    message, version and byte offset.
    """

    __slots__ = ("name", "api_key", "version", "flexible", "message_class", "source", "decode", "encode")

    def __init__(self, spec: MessageSpec, version: int) -> None:
        if not spec.has_version(version):
            low, high = spec.valid_versions
            raise ValueError(f"{spec.name} has no version {version} (defined: {low}-{high})")
        classes = _message_classes(spec.name)
        source, names = codegen.codec_source(spec, version)
        filename = codegen.codegen_filename(f"{spec.name} v{version}")
        _register_source(filename, source)
        namespace = {n: _resolve(n, classes) for n in names}
        exec(compile(source, filename, "exec"), namespace)
        self.name = spec.name
        self.api_key = spec.api_key
        self.version = version
        self.flexible = spec.is_flexible(version)
        self.message_class = classes[spec.name]
        self.source = source
        self.decode = namespace[codegen.decode_function_name(spec, version)]
        self.encode = namespace[codegen.encode_function_name(spec, version)]

    def __repr__(self) -> str:
        return f"<Codec {self.name} v{self.version}{' flexible' if self.flexible else ''}>"


@functools.cache
def codec(name: str, version: int) -> Codec:
    """The cached codec of message `name` (e.g. "JoinGroupRequest") at `version`."""
    if name not in _MESSAGE_NAMES:
        raise KeyError(f"{name} is not a message kcoord serves")
    return Codec(load_spec(name), version)


def request_codec(api_key: int, version: int) -> Codec:
    return codec(api_name(api_key) + "Request", version)


def response_codec(api_key: int, version: int) -> Codec:
    return codec(api_name(api_key) + "Response", version)


def data_codec(name: str, version: int) -> Codec:
    """Codec of a data message such as ConsumerProtocolSubscription (body only, no version prefix)."""
    return codec(name, version)


_INT16 = primitives.INT16


def encode_versioned(name: str, obj, version: int) -> bytes:
    """A data message as the consumer protocol carries it: int16 version, then the body."""
    return _INT16.pack(version) + codec(name, version).encode(obj)


def decode_versioned(name: str, buf, offset: int = 0):
    """Inverse of encode_versioned -> (obj, version). Versions newer than we know decode as our newest
    (fields are only ever appended), as Kafka's ConsumerProtocol does."""
    if len(buf) - offset < 2:
        raise DecodeError("missing version prefix", api=name, offset=offset)
    (version,) = _INT16.unpack_from(buf, offset)
    if version < 0:
        raise DecodeError(f"negative version {version}", api=name, offset=offset)
    low, high = load_spec(name).valid_versions
    version = min(version, high)
    obj, _end = codec(name, version).decode(buf, offset + 2)
    return obj, version
