"""Kafka's JSON message definitions, read from the installed kafka-python package and parsed into a
small field tree that the code generator walks.

The JSON files are Kafka's own `clients/src/main/resources/common/message/*.json`, which kafka-python
ships as package data; we read them in place. The few it lacks (ConsumerGroupHeartbeat,
ConsumerGroupDescribe and the consumer group coordinator records) are written out in our own notation
in protocol/extra_definitions.py.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import pathlib
import re
import uuid

SCHEMA_PACKAGE = "kafka.protocol.schemas.resources"

# Kafka's "versions" strings: "3+", "1-4", "2", "none".
NO_VERSIONS = (0, -1)
_MAX_VERSION = 0x7FFF

# Scalar wire types; everything else is a struct, an array of structs or an array of scalars.
FIXED_FORMATS = {
    "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
    "float64": "d", "bool": "?",
}
SCALAR_TYPES = frozenset(FIXED_FORMATS) | {"uuid", "string", "bytes", "records"}

ZERO_UUID = uuid.UUID(int=0)

_COMMENT = re.compile(r"^\s*//.*$", re.MULTILINE)
_CAMEL_BOUNDARY = re.compile(r"(?<!^)(?=[A-Z])")


def parse_versions(text: str | None) -> tuple[int, int]:
    """"3+" -> (3, 32767), "1-4" -> (1, 4), "2" -> (2, 2), "none"/None -> empty range."""
    if text is None:
        return NO_VERSIONS
    text = text.strip()
    if text in ("", "none"):
        return NO_VERSIONS
    if text.endswith("+"):
        return int(text[:-1]), _MAX_VERSION
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def snake_case(name: str) -> str:
    """"SessionTimeoutMs" -> "session_timeout_ms" (the rule kafka-python uses too, so names agree)."""
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def _in(rng: tuple[int, int], version: int) -> bool:
    return rng[0] <= version <= rng[1]


class Field:
    """One field of a message or struct, as Kafka's JSON defines it.

    (A plain class rather than a dataclass: importing dataclasses costs every CLI start ~10 ms.)
    """

    __slots__ = ("json_name", "name", "type", "versions", "nullable_versions", "tagged_versions", "tag",
                 "default_text", "ignorable", "fields", "about")

    def __init__(self, *, json_name: str, name: str, type: str, versions: tuple[int, int],
                 nullable_versions: tuple[int, int], tagged_versions: tuple[int, int], tag: int | None,
                 default_text: object, ignorable: bool, fields: list[Field] | None, about: str = "") -> None:
        self.json_name = json_name
        self.name = name                        # snake_case attribute name
        self.type = type                        # "int32", "[]int32", "[]JoinGroupRequestProtocol", ...
        self.versions = versions
        self.nullable_versions = nullable_versions
        self.tagged_versions = tagged_versions
        self.tag = tag
        self.default_text = default_text        # raw JSON "default" (None when absent)
        self.ignorable = ignorable
        self.fields = fields                    # for structs and arrays of structs
        self.about = about

    def __repr__(self) -> str:
        return f"Field({self.json_name} {self.type} v{self.versions[0]}-{self.versions[1]})"

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """A struct or an array of structs (the element type is a struct)."""
        return self.fields is not None

    def present_in(self, version: int) -> bool:
        return _in(self.versions, version)

    def nullable_in(self, version: int) -> bool:
        return _in(self.nullable_versions, version)

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and _in(self.tagged_versions, version)

    def default_value(self) -> object:
        """The Python value of this field's schema default (a fresh object for mutable ones)."""
        d = self.default_text
        if self.is_array:
            if d == "null":
                return None
            return []
        if d == "null":
            return None
        t = self.type
        if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            if d is None or d == "":
                return 0
            if isinstance(d, str):
                return int(d, 16) if d.lower().startswith("0x") else int(d)
            return int(d)
        if t == "float64":
            return float(d) if d not in (None, "") else 0.0
        if t == "bool":
            if isinstance(d, str):
                return d.lower() == "true"
            return bool(d)
        if t == "string":
            return "" if d is None else str(d)
        if t in ("bytes", "records"):
            return b""
        if t == "uuid":
            return uuid.UUID(d) if d else ZERO_UUID
        return None  # a non-array struct: the generator substitutes a default instance




class MessageSpec:
    """A request, response, header or data message."""

    __slots__ = ("name", "kind", "api_key", "valid_versions", "flexible_versions", "fields")

    def __init__(self, *, name: str, kind: str, api_key: int | None, valid_versions: tuple[int, int],
                 flexible_versions: tuple[int, int], fields: list[Field]) -> None:
        self.name = name                        # "JoinGroupRequest"
        self.kind = kind                        # "request" | "response" | "header" | "data"
        self.api_key = api_key
        self.valid_versions = valid_versions
        self.flexible_versions = flexible_versions
        self.fields = fields

    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible_versions, version)

    def has_version(self, version: int) -> bool:
        return _in(self.valid_versions, version)


def _parse_field(raw: dict, common: dict[str, list]) -> Field:
    ftype = raw["type"]
    sub = raw.get("fields")
    element = ftype[2:] if ftype.startswith("[]") else ftype
    if sub is None and element not in SCALAR_TYPES:
        sub = common.get(element)
        if sub is None:
            raise ValueError(f"unknown type {ftype!r} for field {raw['name']!r}")
    return Field(
        json_name=raw["name"],
        name=snake_case(raw["name"]),
        type=ftype,
        versions=parse_versions(raw.get("versions")),
        nullable_versions=parse_versions(raw.get("nullableVersions")),
        tagged_versions=parse_versions(raw.get("taggedVersions")),
        tag=raw.get("tag"),
        default_text=raw.get("default"),
        ignorable=bool(raw.get("ignorable", False)),
        fields=None if sub is None else [_parse_field(f, common) for f in sub],
        about=raw.get("about", ""),
    )


@functools.cache
def _schema_dir() -> pathlib.Path:
    # Locate the package data without importing kafka (its __init__ pulls in the whole client,
    # ~100 ms that every CLI start would pay).
    spec = importlib.util.find_spec(SCHEMA_PACKAGE.split(".")[0])
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("kafka-python is not installed; its JSON message definitions are needed")
    return pathlib.Path(spec.submodule_search_locations[0], *SCHEMA_PACKAGE.split(".")[1:])


def read_json(name: str) -> dict:
    """The raw definition `name` (the dict shape of Kafka's JSON): from the installed kafka-python
    package, else from protocol/extra_definitions (what kafka-python 3.0.12 does not ship)."""
    path = _schema_dir() / (name + ".json")
    if not path.exists():
        from kcoord.protocol.extra_definitions import DEFINITIONS
        return DEFINITIONS[name]
    return json.loads(_COMMENT.sub("", path.read_text("utf-8")))


@functools.cache
def load_spec(name: str) -> MessageSpec:
    raw = read_json(name)
    common = {s["name"]: s["fields"] for s in raw.get("commonStructs", [])}
    return MessageSpec(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid_versions=parse_versions(raw["validVersions"]),
        flexible_versions=parse_versions(raw.get("flexibleVersions")),
        fields=[_parse_field(f, common) for f in raw["fields"]],
    )
