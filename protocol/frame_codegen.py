"""Code generation for whole-frame fast paths: message definition -> Python source of a request
reader and a response writer that work on whole frames, without header or message objects.

The broker's hottest requests (Heartbeat, OffsetCommit, ConsumerGroupHeartbeat) are flat: their
fields map onto tuples and columns directly. For each served version this module emits
- `read_v<N>(buf)`: a whole request frame (size prefix included, header already checked by the caller:
  size, api key, version) -> the body's fields, or None for a shape it leaves to the general codec
  (protocol/messages.py), which then decodes it or says what is wrong with it. Not taken: any tagged
  field, a null where the version forbids one, a string of a columnar array that is neither null nor
  empty, more than MAX_COLUMNAR elements in one columnar array, bytes after the body, truncation.
- `body_v<N>(...)` and `frame_v<N>(correlation_id, ...)`: the response body, and the whole response
  frame, from the fields; tagged-field sections are written empty.

Fields are given as Python values, in schema order, over the union of the fields of the versions the
reader serves (a field the version does not carry reads as its default and is not written):
- a struct is a tuple of its fields;
- an array of fixed-width scalars or strings is a tuple (any sequence when writing);
- an array of structs is *columnar* when every field of its struct is fixed-width, or (reading only) a
  string: a tuple of columns, one per field, each a tuple with one item per element. Otherwise it is a
  list of struct tuples. `columnar` decides, and tests convert general-codec objects with it.
"""
from __future__ import annotations

import struct

from kcoord.protocol.codegen import _runs, _size, _Writer
from kcoord.protocol.schema import FIXED_FORMATS, Field, MessageSpec

MAX_COLUMNAR = 2048  # elements of one columnar array the reader unpacks in one go (one Struct per count)


def _union(fields: list[Field], low: int, high: int) -> list[Field]:
    """The fields any of the versions low..high carries, in schema order."""
    return [f for f in fields if any(f.present_in(v) for v in range(low, high + 1))]


def _fixed(f: Field) -> bool:
    return not f.is_array and f.type in FIXED_FORMATS


def columnar(f: Field, low: int, high: int, reading: bool) -> bool:
    """Whether an array of structs is coded as columns (see the module docstring)."""
    if not (f.is_array and f.is_struct):
        return False
    return all(_fixed(g) or (reading and not g.is_array and g.type == "string")
               for g in _union(f.fields, low, high))


def _untagged(fields: list[Field], version: int, flexible: bool) -> list[Field]:
    return [f for f in fields if f.present_in(version) and not (flexible and f.tagged_in(version))]


def _default(w: _Writer, f: Field) -> str:
    """A missing field's value in the tuple form."""
    if f.is_array:
        return "None" if f.default_text == "null" else "()"
    return w.default(f)


class _Reader:
    def __init__(self, w: _Writer, version: int, flexible: bool, low: int, high: int) -> None:
        self.w, self.v, self.flex, self.low, self.high = w, version, flexible, low, high

    def emit(self, ind: int, line: str) -> None:
        self.w.emit(ind, line)

    def length(self, ind: int, wide: bool) -> str:
        n = self.w.var("n")
        if self.flex:
            self.w.names.add("_read_compact_length")
            self.emit(ind, f"{n} = buf[pos] - 1")
            self.emit(ind, f"if {n} < 127:")
            self.emit(ind + 1, "pos += 1")
            self.emit(ind, "else:")
            self.emit(ind + 1, f"{n}, pos = _read_compact_length(buf, pos)")
        else:
            self.emit(ind, f"{n}, = {self.w.unpack('i' if wide else 'h')}(buf, pos)")
            self.emit(ind, f"pos += {4 if wide else 2}")
        return n

    def null(self, n: str, nullable: bool, target: str, ind: int) -> int:
        """A negative length: None where the version allows it (only -1 in non-compact lengths), else
        not taken; returns the indent for a present value."""
        self.emit(ind, f"if {n} < 0:")
        if not nullable:
            self.emit(ind + 1, "return None")
            return ind
        if not self.flex:
            self.emit(ind + 1, f"if {n} != -1:")
            self.emit(ind + 2, "return None")
        self.emit(ind + 1, f"{target} = None")
        self.emit(ind, "else:")
        return ind + 1

    def tags(self, ind: int) -> None:
        if self.flex:
            self.emit(ind, "if buf[pos]:")
            self.emit(ind + 1, "return None")
            self.emit(ind, "pos += 1")

    def struct(self, fields: list[Field], ind: int) -> str:
        """Read a struct's fields into locals; returns the source of its tuple."""
        values = {}
        for is_run, item in _runs(_untagged(fields, self.v, self.flex)):
            if is_run:
                names = [self.w.var("f") for _ in item]
                fmt = "".join(FIXED_FORMATS[f.type] for f in item)
                self.emit(ind, f"{', '.join(names)}, = {self.w.unpack(fmt)}(buf, pos)")
                self.emit(ind, f"pos += {sum(_size(f.type) for f in item)}")
                values.update(zip((f.name for f in item), names, strict=True))
            else:
                target = self.w.var("f")
                self.value(item, target, ind)
                values[item.name] = target
        self.tags(ind)
        union = _union(fields, self.low, self.high)
        return "(" + "".join(f"{values.get(f.name) or _default(self.w, f)}, " for f in union) + ")"

    def value(self, f: Field, target: str, ind: int) -> None:
        w = self.w
        if f.is_array:
            n = self.length(ind, wide=True)
            ind = self.null(n, f.nullable_in(self.v), target, ind)
            self.emit(ind, f"if {n} > end - pos:")  # every element takes a byte at least
            self.emit(ind + 1, "return None")
            if f.element_type in FIXED_FORMATS:
                size = _size(f.element_type)
                w.names.add("_unpack_from")
                self.emit(ind, f"if {n} * {size} > end - pos:")
                self.emit(ind + 1, "return None")
                self.emit(ind, f"{target} = _unpack_from('>%d{FIXED_FORMATS[f.element_type]}' % {n}, buf, pos)")
                self.emit(ind, f"pos += {n} * {size}")
            elif columnar(f, self.low, self.high, reading=True):
                self.columns(f, n, target, ind)
            else:
                lst, i, e = w.var("lst"), w.var("i"), w.var("e")
                self.emit(ind, f"{lst} = [None] * {n}")
                self.emit(ind, f"for {i} in range({n}):")
                if f.is_struct:
                    self.emit(ind + 1, f"{lst}[{i}] = {self.struct(f.fields, ind + 1)}")
                else:
                    self.scalar(f.element_type, False, e, ind + 1)
                    self.emit(ind + 1, f"{lst}[{i}] = {e}")
                self.emit(ind, f"{target} = {lst if f.is_struct else f'tuple({lst})'}")
        elif f.is_struct:
            if f.nullable_in(self.v):
                b = w.var("present")
                self.emit(ind, f"{b} = buf[pos]")
                self.emit(ind, "pos += 1")
                self.emit(ind, f"if {b} == 255:")
                self.emit(ind + 1, f"{target} = None")
                self.emit(ind, f"elif {b} != 1:")
                self.emit(ind + 1, "return None")
                self.emit(ind, "else:")
                ind += 1
            self.emit(ind, f"{target} = {self.struct(f.fields, ind)}")
        else:
            self.scalar(f.type, f.nullable_in(self.v), target, ind)

    def scalar(self, ftype: str, nullable: bool, target: str, ind: int) -> None:
        if ftype in FIXED_FORMATS:
            self.emit(ind, f"{target}, = {self.w.unpack(FIXED_FORMATS[ftype])}(buf, pos)")
            self.emit(ind, f"pos += {_size(ftype)}")
            return
        if ftype == "uuid":
            self.w.names.add("_UUID")
            self.emit(ind, f"{target} = _UUID(bytes=buf[pos:pos + 16])")  # short: ValueError, not taken
            self.emit(ind, "pos += 16")
            return
        if ftype not in ("string", "bytes"):
            raise ValueError(f"no fast path for {ftype} fields")
        n = self.length(ind, wide=ftype == "bytes")
        ind = self.null(n, nullable, target, ind)
        tail = ".decode()" if ftype == "string" else ""
        self.emit(ind, f"{target} = buf[pos:pos + {n}]{tail}")
        self.emit(ind, f"pos += {n}")

    def columns(self, f: Field, n: str, target: str, ind: int) -> None:
        """Every element in the common shape (strings null or empty, no tagged fields) has the same
        size: the whole array is one unpack, sliced into columns."""
        w = self.w
        present = _untagged(f.fields, self.v, self.flex)
        fmt, at = "", {}
        for g in present:
            at[g.name] = len(fmt)
            fmt += FIXED_FORMATS[g.type] if _fixed(g) else ("B" if self.flex else "h")
        if self.flex:
            fmt += "B"
        step, size = len(fmt), _size_of(fmt)
        flat = w.var("flat")
        w.names.update(("_columns",))
        self.emit(ind, f"if {n} > {MAX_COLUMNAR} or {n} * {size} > end - pos:")
        self.emit(ind + 1, "return None")
        self.emit(ind, f"{flat} = _columns({fmt!r}, {n})(buf, pos)")
        self.emit(ind, f"pos += {n} * {size}")
        if self.flex:
            self.emit(ind, f"if {flat}[{step - 1}::{step}] != (0,) * {n}:")
            self.emit(ind + 1, "return None")
        cols = []
        for g in _union(f.fields, self.low, self.high):
            if g.name not in at:
                cols.append(f"({_default(w, g)},) * {n}")
                continue
            col = f"{flat}[{at[g.name]}::{step}]"
            if not _fixed(g):
                table = ("_TEXT_COMPACT" if self.flex else "_TEXT16") + ("_NULLABLE" if g.nullable_in(self.v) else "")
                w.names.add(table)
                c = w.var("c")
                empty = 1 if self.flex else 0
                self.emit(ind, f"{c} = {col}")
                # the usual: every string empty; else each must be null (where allowed) or empty
                self.emit(ind, f"{c} = ('',) * {n} if {c} == ({empty},) * {n} else tuple(map({table}.__getitem__, {c}))")
                col = c
            cols.append(col)
        self.emit(ind, f"{target} = ({''.join(c + ', ' for c in cols)})")


def _size_of(fmt: str) -> int:
    return struct.calcsize(">" + fmt)


def reader_source(spec: MessageSpec, version: int, low: int, high: int) -> tuple[str, set[str]]:
    """Source of read_v<N>(buf) -> tuple | None for a request message (see the module docstring)."""
    flexible = spec.is_flexible(version)
    w = _Writer()
    r = _Reader(w, version, flexible, low, high)
    w.emit(0, f"# {spec.name} v{version}: whole-frame reader generated from Kafka's {spec.name}.json")
    w.emit(0, f"def read_v{version}(buf):")
    w.emit(1, "try:")
    w.emit(2, "end = len(buf)")
    # request header: client_id (int16 length in header v1 and v2), then v2's tag section
    w.emit(2, f"n0, = {w.unpack('h')}(buf, 12)")
    w.emit(2, "pos = 14")
    w.emit(2, "if n0 > 0:")
    w.emit(3, "buf[pos:pos + n0].decode()")
    w.emit(3, "pos += n0")
    w.emit(2, "elif n0 < -1:")
    w.emit(3, "return None")
    r.tags(2)
    fields = r.struct(spec.fields, 2)
    w.emit(2, "if pos != end:")
    w.emit(3, "return None")
    w.emit(2, f"return {fields}")
    w.emit(1, "except (IndexError, ValueError, KeyError, _StructError):")
    w.names.add("_StructError")
    w.emit(2, "return None")
    return "\n".join(w.lines) + "\n", w.names


class _BodyWriter:
    def __init__(self, w: _Writer, version: int, flexible: bool, low: int, high: int) -> None:
        self.w, self.v, self.flex, self.low, self.high = w, version, flexible, low, high

    def emit(self, ind: int, line: str) -> None:
        self.w.emit(ind, line)

    def length(self, expr: str, ind: int, wide: bool) -> None:
        w, n = self.w, self.w.var("n")
        self.emit(ind, f"{n} = {expr}")
        if self.flex:
            w.names.update(("_COMPACT_LENGTHS", "_compact_length"))
            self.emit(ind, f"parts.append(_COMPACT_LENGTHS[{n}] if {n} < 127 else _compact_length({n}))")
        else:
            table = "_LEN32" if wide else "_LEN16"
            w.names.update((table, "_LENGTH_TABLE_SIZE"))
            self.emit(ind, f"parts.append({table}[{n}] if {n} < _LENGTH_TABLE_SIZE else "
                           f"{w.pack('i' if wide else 'h')}({n}))")

    def if_none(self, v: str, nullable: bool, ind: int, wide: bool) -> int:
        if not nullable:
            return ind   # None fails below, as the general encoder's
        self.w.names.add("_NULL_INT32" if wide else "_NULL_INT16")
        null = "b'\\x00'" if self.flex else ("_NULL_INT32" if wide else "_NULL_INT16")
        self.emit(ind, f"if {v} is None:")
        self.emit(ind + 1, f"parts.append({null})")
        self.emit(ind, "else:")
        return ind + 1

    def struct(self, fields: list[Field], values: list[str], ind: int) -> None:
        """`values`: the sources of the struct's union fields, in order."""
        by_name = dict(zip((f.name for f in _union(fields, self.low, self.high)), values, strict=True))
        for is_run, item in _runs(_untagged(fields, self.v, self.flex)):
            if is_run:
                fmt = "".join(FIXED_FORMATS[f.type] for f in item)
                self.emit(ind, f"parts.append({self.w.pack(fmt)}({', '.join(by_name[f.name] for f in item)}))")
            else:
                self.value(item, by_name[item.name], ind)
        if self.flex:
            self.emit(ind, "parts.append(b'\\x00')")

    def value(self, f: Field, v: str, ind: int) -> None:
        w = self.w
        if f.is_array:
            ind = self.if_none(v, f.nullable_in(self.v), ind, wide=True)
            union = _union(f.fields, self.low, self.high) if f.is_struct else []
            if columnar(f, self.low, self.high, reading=False):
                self.length(f"len({v}[0])", ind, wide=True)
                present = _untagged(f.fields, self.v, self.flex)
                fmt = "".join(FIXED_FORMATS[g.type] for g in present) + ("B" if self.flex else "")
                cols = [f"{v}[{[g.name for g in union].index(g.name)}]" for g in present]
                if self.flex:
                    w.names.add("_repeat")
                    cols.append("_repeat(0)")
                w.names.add("_map")
                self.emit(ind, f"parts += _map({w.pack(fmt)}, {', '.join(cols)})")
                return
            self.length(f"len({v})", ind, wide=True)
            if f.element_type in FIXED_FORMATS:
                w.names.add("_pack")
                self.emit(ind, f"parts.append(_pack('>%d{FIXED_FORMATS[f.element_type]}' % len({v}), *{v}))")
                return
            e = w.var("e")
            self.emit(ind, f"for {e} in {v}:")
            if f.is_struct:
                self.struct(f.fields, [f"{e}[{i}]" for i in range(len(union))], ind + 1)
            else:
                self.scalar(f.element_type, False, e, ind + 1)
        elif f.is_struct:
            if f.nullable_in(self.v):
                self.emit(ind, f"if {v} is None:")
                self.emit(ind + 1, "parts.append(b'\\xff')")
                self.emit(ind, "else:")
                self.emit(ind + 1, "parts.append(b'\\x01')")
                ind += 1
            n = len(_union(f.fields, self.low, self.high))
            self.struct(f.fields, [f"{v}[{i}]" for i in range(n)], ind)
        else:
            self.scalar(f.type, f.nullable_in(self.v), v, ind)

    def scalar(self, ftype: str, nullable: bool, v: str, ind: int) -> None:
        w = self.w
        if ftype in FIXED_FORMATS:
            self.emit(ind, f"parts.append({w.pack(FIXED_FORMATS[ftype])}({v}))")
        elif ftype == "uuid":
            self.emit(ind, f"parts.append({v}.bytes)")
        elif ftype == "string":
            cache, miss = ("_STRINGS_COMPACT", "_string_compact") if self.flex else ("_STRINGS16", "_string16")
            w.names.update((cache, miss))
            expr = f"{cache}.get({v}) or {miss}({v}, 'string', {self.v})"
            if nullable:
                null = "b'\\x00'" if self.flex else "_NULL_INT16"
                w.names.add("_NULL_INT16")
                expr = f"{null} if {v} is None else ({expr})"
            self.emit(ind, f"parts.append({expr})")
        elif ftype == "bytes":
            ind = self.if_none(v, nullable, ind, wide=True)
            self.length(f"len({v})", ind, wide=True)
            self.emit(ind, f"parts.append({v})")
        else:
            raise ValueError(f"no fast path for {ftype} fields")


def writer_source(spec: MessageSpec, version: int, low: int, high: int) -> tuple[str, set[str]]:
    """Source of body_v<N>(*fields) -> bytes and frame_v<N>(correlation_id, *fields) -> whole frame
    (response header v1 in flexible versions: correlation id, then an empty tag section)."""
    flexible = spec.is_flexible(version)
    w = _Writer()
    union = _union(spec.fields, low, high)
    params = ", ".join(f.name for f in union)
    head = "ii" + ("B" if flexible else "")
    w.emit(0, f"# {spec.name} v{version}: whole-frame writer generated from Kafka's {spec.name}.json")
    present = _untagged(spec.fields, version, flexible)
    if all(_fixed(f) for f in present):  # a fixed-size frame: one pack
        fmt = head + "".join(FIXED_FORMATS[f.type] for f in present) + ("B" if flexible else "")
        args = ["correlation_id"] + (["0"] if flexible else []) + [f.name for f in present] + (["0"] if flexible else [])
        w.emit(0, f"def frame_v{version}(correlation_id, {params}):")
        w.emit(1, f"return {w.pack(fmt)}({_size_of(fmt) - 4}, {', '.join(args)})")
    else:
        w.emit(0, f"def frame_v{version}(correlation_id, {params}):")
        w.emit(1, f"body = body_v{version}({params})")
        w.emit(1, f"return {w.pack(head)}(len(body) + {_size_of(head) - 4}, correlation_id{', 0' if flexible else ''}) + body")
    w.emit(0, "")
    w.emit(0, f"def body_v{version}({params}):")
    w.emit(1, "parts = []")
    _BodyWriter(w, version, flexible, low, high).struct(spec.fields, [f.name for f in union], 1)
    w.emit(1, "return b''.join(parts)")
    return "\n".join(w.lines) + "\n", w.names
