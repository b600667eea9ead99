"""Test helpers: hypothesis strategies built from our parsed schema, and a bridge to kafka-python's
codec (the reference our generated codecs must agree with byte for byte).

kafka-python differs from Kafka's Java classes only in value representation, which the bridge maps:
- a zero UUID is None there (Kafka's Uuid.ZERO_UUID here);
- some authorized-operations int32 fields are patched to a set of bit numbers (None = only bit 31),
  and two of them renamed to `authorized_operations`;
- a tagged struct at its default is None there (Kafka writes neither).
"""
from __future__ import annotations

import importlib
import pkgutil
import uuid

import kafka.protocol as kp_root
from hypothesis import strategies as st
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs import BitField

from kcoord.protocol import messages as m
from kcoord.protocol.schema import ZERO_UUID, Field, load_spec

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
}


def _kafka_python_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(kp_root.__path__, kp_root.__name__ + "."):
        if ".old" in info.name or info.name.endswith("generate_stubs"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if isinstance(obj, type) and issubclass(obj, (ApiMessage, ApiData)) and \
                    getattr(obj, "_json", None) is not None:
                found[name] = obj
    return found


KP_CLASSES = _kafka_python_classes()


# ---------------------------------------------------------------------------------------------
# Strategies: random messages of one version, built from our schema.
# ---------------------------------------------------------------------------------------------

def _scalar(ftype: str) -> st.SearchStrategy:
    if ftype in _INT_RANGES:
        lo, hi = _INT_RANGES[ftype]
        return st.integers(lo, hi)
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False)
    if ftype == "uuid":
        return st.just(ZERO_UUID) | st.uuids()
    # Mostly short values; sometimes long enough (>= 127) to need a multi-byte compact length.
    if ftype == "string":
        return st.text(max_size=8) | st.text(alphabet="ké", min_size=126, max_size=140)
    return st.binary(max_size=8) | st.binary(min_size=126, max_size=140)  # bytes, records


@st.composite
def messages(draw, name: str, version: int):
    spec = load_spec(name)
    top = m.message_class(name)

    def build(cls, fields, depth):
        kwargs = {}
        for f in fields:
            if not f.present_in(version):
                continue
            kwargs[f.name] = draw_field(f, depth)
        return cls(**kwargs)

    def draw_field(f: Field, depth: int):
        nullable = f.nullable_in(version) or (f.is_struct and not f.is_array and f.tagged_in(version))
        if nullable and draw(st.integers(0, 4)) == 0:
            return None
        if f.is_array:
            if not f.is_struct and draw(st.integers(0, 9)) == 0:
                size = draw(st.integers(126, 130))   # a count needing a multi-byte compact length
            else:
                size = draw(st.integers(0, 3 if depth < 2 else 1))
            return [element(f, depth) for _ in range(size)]
        return element(f, depth)

    def element(f: Field, depth: int):
        if f.is_struct:
            return build(getattr(top, f.element_type), f.fields, depth + 1)
        return draw(_scalar(f.element_type))

    return build(top, spec.fields, 0)


# ---------------------------------------------------------------------------------------------
# Bridge: our objects <-> kafka-python's objects.
# ---------------------------------------------------------------------------------------------

def _children(kf):
    """kafka-python's field list of a struct or array-of-struct field (the one carrying data classes)."""
    inner = getattr(kf, "array_of", kf)
    return inner._fields


def _is_bitfield(kf) -> bool:
    return getattr(kf, "_type_str", None) == "bitfield"


def _to_bits(value: int):
    bits = BitField.from_32_bit_field(value & 0xFFFFFFFF)
    return None if bits == {31} else bits


def _from_bits(bits) -> int:
    value = BitField.to_32_bit_field({31} if bits is None else bits)
    return value - (1 << 32) if value >= 1 << 31 else value


def to_kafka_python(obj, name: str, version: int):
    """Our message object -> the equivalent kafka-python object for `version`."""
    kp_cls = KP_CLASSES[name]
    kwargs = _kp_kwargs(obj, load_spec(name).fields, kp_cls._struct._fields, version)
    return kp_cls(version=version, **kwargs)


def _kp_kwargs(obj, fields: list[Field], kp_fields, version: int) -> dict:
    kwargs = {}
    for f, kf in zip(fields, kp_fields, strict=True):
        if f.present_in(version):
            kwargs[kf.name] = _kp_value(getattr(obj, f.name), f, kf, version)
    return kwargs


def _kp_value(value, f: Field, kf, version: int):
    if value is None:
        return None
    if f.is_struct:
        def one(item):
            return kf.data_class(**_kp_kwargs(item, f.fields, _children(kf), version))
        if f.is_array:
            return [one(item) for item in value]
        if f.tagged_in(version) and value == type(value)():
            return None
        return one(value)
    if _is_bitfield(kf):
        return _to_bits(value)
    if f.element_type == "uuid":
        if f.is_array:
            return [None if u == ZERO_UUID else u for u in value]
        return None if value == ZERO_UUID else value
    return value


def from_kafka_python(kp_obj, name: str, version: int):
    """A kafka-python object decoded at `version` -> our class, with our value conventions."""
    return _ours(kp_obj, m.message_class(name), load_spec(name).fields,
                 KP_CLASSES[name]._struct._fields, version)


def _ours(kp_obj, cls, fields: list[Field], kp_fields, version: int):
    kwargs = {}
    for f, kf in zip(fields, kp_fields, strict=True):
        if not f.present_in(version):
            continue
        value = getattr(kp_obj, kf.name)
        if f.is_struct and value is not None:
            sub = getattr(cls, f.element_type)
            if f.is_array:
                value = [_ours(v, sub, f.fields, _children(kf), version) for v in value]
            else:
                value = _ours(value, sub, f.fields, _children(kf), version)
        elif _is_bitfield(kf):
            value = _from_bits(value)
        elif f.element_type == "uuid":
            if f.is_array:
                value = [ZERO_UUID if u is None else u for u in value]
            elif value is None:
                value = ZERO_UUID
        kwargs[f.name] = value
    return cls(**kwargs)


def kafka_python_encode(kp_obj, version: int, header: bool = False) -> bytes:
    """Body only (for data messages, header=True adds their int16 version prefix)."""
    if isinstance(kp_obj, ApiData):
        return kp_obj.encode(version=version, header=header)
    return kp_obj.encode(version=version)


def kafka_python_decode(name: str, data: bytes, version: int):
    # ApiMessage.decode itself, bypassing ApiVersionsResponse's client-side "error => v0" override.
    return ApiMessage.decode.__func__(KP_CLASSES[name], data, version=version) \
        if issubclass(KP_CLASSES[name], ApiMessage) else KP_CLASSES[name].decode(data, version=version,
                                                                                header=False)


def sample_message(name: str, version: int, seed: int = 1):
    """A deterministic message with every field of `version` set to a non-default value and every
    array holding two elements (so truncating its encoding cuts through every kind of field)."""
    top = m.message_class(name)
    counter = iter(range(seed, 1 << 30))

    def scalar(ftype: str):
        k = next(counter)
        if ftype in _INT_RANGES:
            lo, hi = _INT_RANGES[ftype]
            return lo + (k * 7919) % (hi - lo)
        if ftype == "bool":
            return True
        if ftype == "float64":
            return k + 0.5
        if ftype == "uuid":
            return uuid.UUID(int=k)
        if ftype == "string":
            return f"s{k}é"
        return bytes([k % 256]) * 3

    def build(cls, fields):
        kwargs = {}
        for f in fields:
            if not f.present_in(version):
                continue
            if f.is_struct:
                sub = getattr(top, f.element_type)
                value = [build(sub, f.fields) for _ in range(2)] if f.is_array else build(sub, f.fields)
            else:
                value = [scalar(f.element_type) for _ in range(2)] if f.is_array else scalar(f.type)
            kwargs[f.name] = value
        return cls(**kwargs)

    return build(top, load_spec(name).fields)
