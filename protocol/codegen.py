"""Code generation: message definition (schema.MessageSpec) -> Python source.

Pure functions from spec to source text; kcoord.protocol.messages compiles the text, registers it in
linecache (so tracebacks show it) and caches the result. One decode and one encode function per
(message, version), straight-line: consecutive fixed-width fields become one precompiled
struct.Struct call and nested structs are inlined as loops. Hot paths measured by bench/codec:
- arrays of flat structs (fixed-width fields, strings, bytes) decode with a layout guessed from the
  previous element, one unpack_from per element (_DecodeGen.shaped_loop);
- encoders take strings with their length prefix from a bounded cache (primitives.string16);
- the decoder is the codec's public decode: it converts bytes-like input and turns any failure into
  DecodeError itself (a try block is free in CPython 3.11 until something raises).

Generated decoders rely on three locals: `buf` (bytes), `pos` (current offset) and `end`
(len(buf)). No length prefix is trusted beyond the buffer:
- an array count is checked against the bytes remaining before any element is read (each element
  takes at least one byte), so a forged count can neither allocate beyond the input's size nor loop;
- a string/bytes length only bounds a slice, which past the end is merely short; `pos` then runs
  past `end`, and one check at the end of the message reports it;
- fixed-width reads are not pre-checked: a short buffer makes unpack_from raise and the decoder's
  except clause turns that into DecodeError, reading the failing offset from the generated frame;
- a guessed element layout is only read where it fits in the bytes left.
"""
from __future__ import annotations

import struct

from kcoord.protocol.primitives import LENGTH_TABLE_SIZE
from kcoord.protocol.schema import FIXED_FORMATS, ZERO_UUID, Field, MessageSpec

CODEGEN_FILENAME_PREFIX = "<kcoord-codegen "

_FMT_NAMES = {"?": "o"}  # struct format chars that are not identifier characters


def fmt_ident(fmt: str) -> str:
    return "".join(_FMT_NAMES.get(c, c) for c in fmt)


def codegen_filename(title: str) -> str:
    return f"{CODEGEN_FILENAME_PREFIX}{title}>"


# ---------------------------------------------------------------------------------------------
# Classes: one per message and per struct type, shared by all versions.
# ---------------------------------------------------------------------------------------------

class ClassSpec:
    __slots__ = ("name", "fields", "children")

    def __init__(self, name: str, fields: list[Field], children: list[str]) -> None:
        self.name = name
        self.fields = fields            # union over all versions, in first-seen order
        self.children = children        # struct type names directly nested in this struct


def collect_classes(spec: MessageSpec) -> dict[str, ClassSpec]:
    """Every class the message needs: the message itself plus one per struct type name."""
    classes: dict[str, ClassSpec] = {}

    def visit(name: str, fields: list[Field]) -> None:
        cs = classes.get(name)
        if cs is None:
            cs = classes[name] = ClassSpec(name, [], [])
        known = {f.name for f in cs.fields}
        for f in fields:
            if f.name not in known:
                cs.fields.append(f)
                known.add(f.name)
            if f.is_struct:
                if f.element_type not in cs.children:
                    cs.children.append(f.element_type)
                visit(f.element_type, f.fields)

    visit(spec.name, spec.fields)
    return classes


def default_literal(f: Field) -> str:
    """Source text of a field's default ("[]" for arrays: the constructor makes a fresh list)."""
    if f.is_array:
        return "None" if f.default_text == "null" else "[]"
    if f.is_struct:
        return "None"
    value = f.default_value()
    if value == ZERO_UUID:
        return "_ZERO_UUID"
    if f.type == "uuid":
        return f"_UUID({str(value)!r})"
    return repr(value)


def class_source(cs: ClassSpec) -> str:
    """A plain class with __slots__, a kwargs constructor taking schema defaults, __eq__, __repr__."""
    names = [f.name for f in cs.fields]
    slots = names + ["_unknown_tagged_fields"]
    lines = [f"class {cs.name}:"]
    lines.append(f"    __slots__ = {tuple(slots)!r}")
    lines.append("    __hash__ = None  # mutable, like Kafka's generated Data classes")
    params = []
    body = []
    for f in cs.fields:
        lit = default_literal(f)
        if lit == "[]":
            params.append(f"{f.name}=_MISSING")
            body.append(f"        self.{f.name} = [] if {f.name} is _MISSING else {f.name}")
        else:
            params.append(f"{f.name}={lit}")
            body.append(f"        self.{f.name} = {f.name}")
    params.append("_unknown_tagged_fields=None")
    body.append("        self._unknown_tagged_fields = _unknown_tagged_fields")
    lines.append(f"    def __init__(self, *, {', '.join(params)}):")
    lines.extend(body)
    mine = ", ".join(f"self.{n}" for n in slots)
    theirs = ", ".join(f"other.{n}" for n in slots)
    lines.append("    def __eq__(self, other):")
    lines.append("        if type(other) is not type(self):")
    lines.append("            return NotImplemented")
    lines.append(f"        return ({mine},) == ({theirs},)")
    shown = ", ".join(f"{n}={{self.{n}!r}}" for n in names)
    lines.append("    def __repr__(self):")
    lines.append(f"        text = f'{cs.name}({shown}'")
    lines.append("        if self._unknown_tagged_fields:")
    lines.append("            text += f', _unknown_tagged_fields={self._unknown_tagged_fields!r}'")
    lines.append("        return text + ')'")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Codecs: one decode and one encode function per (message, version).
# ---------------------------------------------------------------------------------------------

class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: set[str] = set()   # globals the source refers to (resolved by messages.py)
        self.uses_view = False         # the decoder slices records out of one memoryview of buf
        self._n = 0

    def var(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line if line else "")

    def unpack(self, fmt: str) -> str:
        name = "_U_" + fmt_ident(fmt)
        self.names.add(name)
        return name

    def default(self, f: Field) -> str:
        """A field's default as source text, noting the globals it needs."""
        lit = default_literal(f)
        if "_ZERO_UUID" in lit:
            self.names.add("_ZERO_UUID")
        if "_UUID(" in lit:
            self.names.add("_UUID")
        return lit

    def pack(self, fmt: str) -> str:
        name = "_P_" + fmt_ident(fmt)
        self.names.add(name)
        return name


def _is_fixed(f: Field) -> bool:
    return not f.is_array and f.type in FIXED_FORMATS


def _runs(fields: list[Field]):
    """Group consecutive fixed-width fields: yields (True, [fields]) or (False, field)."""
    run: list[Field] = []
    for f in fields:
        if _is_fixed(f):
            run.append(f)
            continue
        if run:
            yield True, run
            run = []
        yield False, f
    if run:
        yield True, run


def _split(fields: list[Field], version: int, flexible: bool):
    present = [f for f in fields if f.present_in(version)]
    tagged = sorted((f for f in present if flexible and f.tagged_in(version)), key=lambda f: f.tag)
    untagged = [f for f in present if not (flexible and f.tagged_in(version))]
    return untagged, tagged


def _flat_fields(f: Field, version: int, flexible: bool) -> list[Field] | None:
    """The untagged fields of an array's element struct if its layout is fixed once its string and
    bytes lengths are known (fixed-width fields, strings and bytes only), else None.

    Such arrays are coded with a layout guessed from the previous element (shaped loops). Only worth
    it when there is something to check in one go: a length, or a flexible struct's tag section.
    """
    untagged, _tagged = _split(f.fields, version, flexible)
    for g in untagged:
        if not (_is_fixed(g) or (not g.is_array and g.type in ("string", "bytes"))):
            return None
    if not flexible and all(_is_fixed(g) for g in untagged):
        return None
    return untagged


class _DecodeGen:
    """Emits the body of decode_<Message>_v<N>(buf, offset=0) -> (obj, pos)."""

    def __init__(self, w: _Writer, version: int, flexible: bool, classes: dict[str, ClassSpec]) -> None:
        self.w = w
        self.v = version
        self.flex = flexible
        self.classes = classes

    def length(self, name: str, ind: int, wide: bool) -> str:
        """Read a length/count prefix into a fresh local; -1 (or less) means null.

        Compact lengths (unsigned varint N+1) inline the one-byte case, N in -1..126.
        """
        w = self.w
        n = w.var("n")
        if self.flex:
            w.names.add("_read_compact_length")
            w.emit(ind, f"{n} = buf[pos] - 1")
            w.emit(ind, f"if {n} < 127:")
            w.emit(ind + 1, "pos += 1")
            w.emit(ind, "else:")
            w.emit(ind + 1, f"{n}, pos = _read_compact_length(buf, pos)")
        else:
            fmt = "i" if wide else "h"
            w.emit(ind, f"{n}, = {w.unpack(fmt)}(buf, pos)")
            w.emit(ind, f"pos += {4 if wide else 2}")
        return n

    def if_null(self, name: str, nullable: bool, n: str, target: str, ind: int) -> int:
        """Emit the branch for a negative (null) length; returns the indent for a present value."""
        w = self.w
        w.emit(ind, f"if {n} < 0:")
        if not nullable:
            w.names.add("_null_error")
            w.emit(ind + 1, f"raise _null_error({name!r}, pos)")
            return ind
        w.emit(ind + 1, f"{target} = None")
        w.emit(ind, "else:")
        return ind + 1

    def overrun_check(self, f: Field, need: str, ind: int) -> None:
        self.w.names.add("_overrun")
        self.w.emit(ind, f"if {need} > end - pos:")
        self.w.emit(ind + 1, f"raise _overrun({f.name!r}, {need}, end - pos, pos)")

    def scalar(self, f: Field, ftype: str, target: str, ind: int, nullable: bool,
               lens: list[str] | None = None) -> None:
        """A single non-fixed scalar (string, bytes, records, uuid) into `target`.

        A slice past the end of `buf` is merely short, so strings and bytes skip a per-field bounds
        check: `pos` then runs past `end`, which the check at the end of the message reports.
        """
        w = self.w
        if ftype == "uuid":
            w.names.add("_UUID")
            w.emit(ind, f"{target} = _UUID(bytes=buf[pos:pos + 16])")
            w.emit(ind, "pos += 16")
            return
        n = self.length(f.name, ind, wide=ftype != "string")
        if lens is not None:
            lens.append(n)
        ind = self.if_null(f.name, nullable, n, target, ind)
        if ftype == "string":
            expr = f"buf[pos:pos + {n}].decode()"
        elif ftype == "bytes":
            expr = f"buf[pos:pos + {n}]"
        else:  # records: a zero-copy view, parsed later by kcoord.protocol.records
            w.uses_view = True
            expr = f"bufview[pos:pos + {n}]"
        w.emit(ind, f"{target} = {expr}")
        w.emit(ind, f"pos += {n}")

    def value(self, f: Field, target: str, ind: int, lens: list[str] | None = None) -> None:
        """Any field (untagged layout) into `target`; `lens` collects the length locals of scalars."""
        w = self.w
        if f.is_array:
            n = self.length(f.name, ind, wide=True)
            ind = self.if_null(f.name, f.nullable_in(self.v), n, target, ind)
            elem = f.element_type
            if elem in FIXED_FORMATS:
                size = f"{n} * {_size(elem)}"
                self.overrun_check(f, size, ind)
                w.names.add("_unpack_from")
                w.emit(ind, f"{target} = list(_unpack_from('>%d{FIXED_FORMATS[elem]}' % {n}, buf, pos))")
                w.emit(ind, f"pos += {size}")
                return
            # Kafka's rule: never believe a count larger than the bytes left (each element >= 1 byte).
            self.overrun_check(f, n, ind)
            # Filled by index: cheaper than append. Sizing the list up front is safe because the count
            # is already bounded by the bytes left (Kafka's generated code sizes its ArrayList alike).
            lst, i = w.var("lst"), w.var("i")
            w.emit(ind, f"{lst} = [None] * {n}")
            flat = _flat_fields(f, self.v, self.flex) if f.is_struct else None
            if flat is not None:
                self.shaped_loop(f, flat, n, lst, i, ind)
            else:
                w.emit(ind, f"for {i} in range({n}):")
                e = w.var("e")
                if f.is_struct:
                    self.struct(elem, f.fields, e, ind + 1)
                else:   # array elements are never null; nullableVersions is about the array
                    self.scalar(f, elem, e, ind + 1, nullable=False)
                w.emit(ind + 1, f"{lst}[{i}] = {e}")
            w.emit(ind, f"{target} = {lst}")
        elif f.is_struct:
            if f.nullable_in(self.v):
                b = w.var("present")
                w.emit(ind, f"{b}, = {w.unpack('b')}(buf, pos)")
                w.emit(ind, "pos += 1")
                w.emit(ind, f"if {b} < 0:")
                w.emit(ind + 1, f"{target} = None")
                w.emit(ind, "else:")
                ind += 1
            s = w.var("s")
            self.struct(f.element_type, f.fields, s, ind)
            w.emit(ind, f"{target} = {s}")
        elif _is_fixed(f):
            fmt = FIXED_FORMATS[f.type]
            w.emit(ind, f"{target}, = {w.unpack(fmt)}(buf, pos)")
            w.emit(ind, f"pos += {_size(f.type)}")
        else:
            self.scalar(f, f.type, target, ind, f.nullable_in(self.v), lens)

    def new_object(self, cls: str, untagged: list[Field], obj: str, ind: int) -> None:
        """Allocate without __init__; every slot the wire does not fill (fields this version does not
        carry, or carries only as tags) gets its default."""
        w = self.w
        w.names.add("C_" + cls)
        w.emit(ind, f"{obj} = _new(C_{cls})")
        for f in self.classes[cls].fields:
            if any(f is g or f.name == g.name for g in untagged):
                continue
            w.emit(ind, f"{obj}.{f.name} = {w.default(f)}")
        w.emit(ind, f"{obj}._unknown_tagged_fields = None")

    def shaped_loop(self, f: Field, flat: list[Field], n: str, lst: str, i: str, ind: int) -> None:
        """Decode an array of flat structs, guessing each element's layout from the previous one.

        Elements of one array usually have the same string lengths (member ids, empty metadata). After
        an element is decoded field by field, its layout becomes one precompiled struct format (e.g.
        ">h40sh0si42s"); the next element is then read with a single unpack_from and accepted only if
        every length prefix (and tag-section byte) it holds equals the guess, which makes the bytes
        parse exactly as the field-by-field path would. A mismatch falls back to that path and learns
        again, at most SHAPE_LEARNS times per array.
        """
        w = self.w
        w.names.add("_shape")
        size, unpack, learn = w.var("shape_size"), w.var("shape"), w.var("learn")
        fit = w.var("fit")   # the last position where a guessed element fits; -1: no guess
        # Per variable-length field, the local holding the length prefix the guess expects.
        var_fields = [g for g in flat if not _is_fixed(g)]
        expected = {g.name: w.var("want") for g in var_fields}
        w.emit(ind, f"{fit} = -1")
        w.emit(ind, f"{learn} = {SHAPE_LEARNS} if {n} >= {SHAPE_MIN_COUNT} else 0")
        w.emit(ind, f"for {i} in range({n}):")
        body = ind + 1
        # Fast path: one unpack_from for the whole element.
        e = w.var("e")
        w.emit(body, f"if pos <= {fit}:")
        self.new_object(f.element_type, flat, e, body + 1)
        targets, checks, assigns = [], [], []
        for g in flat:
            if _is_fixed(g):
                targets.append(f"{e}.{g.name}")
                continue
            prefix, data = w.var("len"), w.var("raw")
            targets += [prefix, data]
            checks.append(f"{prefix} == {expected[g.name]}")
            value = f"{data}.decode()" if g.type == "string" else data
            if g.nullable_in(self.v):
                null = f"not {prefix}" if self.flex else f"{prefix} < 0"
                value = f"None if {null} else {value}"
            assigns.append(f"{e}.{g.name} = {value}")
        if self.flex:
            tag = w.var("tags")
            targets.append(tag)
            checks.append(f"not {tag}")
        w.emit(body + 1, f"{', '.join(targets)}, = {unpack}(buf, pos)")
        w.emit(body + 1, f"if {' and '.join(checks)}:")
        for line in assigns:
            w.emit(body + 2, line)
        w.emit(body + 2, f"pos += {size}")
        w.emit(body + 2, f"{lst}[{i}] = {e}")
        w.emit(body + 2, "continue")
        # Field by field, then learn this element's layout.
        lens: list[str] = []
        self.struct(f.element_type, f.fields, e, body, lens)
        w.emit(body, f"{lst}[{i}] = {e}")
        w.emit(body, f"if {learn}:")
        w.emit(body + 1, f"{learn} -= 1")
        got = dict(zip((g.name for g in var_fields), lens, strict=True))
        fmt = []
        for g in flat:
            if _is_fixed(g):
                fmt.append(FIXED_FORMATS[g.type])
            else:
                ln = got[g.name]
                prefix = "B" if self.flex else ("h" if g.type == "string" else "i")
                fmt.append(f"{prefix}{{{ln} if {ln} > 0 else 0}}s")
        if self.flex:
            fmt.append("B")
        learned = body + 1
        if self.flex and var_fields:   # a guessed compact length must be a one-byte varint
            w.emit(learned, f"if {' or '.join(f'{got[g.name]} >= 127' for g in var_fields)}:")
            w.emit(learned + 1, f"{fit} = -1")
            w.emit(learned, "else:")
            learned += 1
        st = w.var("st")
        w.emit(learned, f"{st} = _shape({'f' if var_fields else ''}'>{''.join(fmt)}')")
        w.emit(learned, f"{unpack}, {size} = {st}.unpack_from, {st}.size")
        w.emit(learned, f"{fit} = end - {size}")
        for g in var_fields:
            plus = " + 1" if self.flex else ""
            w.emit(learned, f"{expected[g.name]} = {got[g.name]}{plus}")

    def struct(self, cls: str, fields: list[Field], obj: str, ind: int, lens: list[str] | None = None) -> None:
        w = self.w
        untagged, tagged = _split(fields, self.v, self.flex)
        self.new_object(cls, untagged, obj, ind)
        for is_run, item in _runs(untagged):
            if is_run:
                fmt = "".join(FIXED_FORMATS[f.type] for f in item)
                targets = ", ".join(f"{obj}.{f.name}" for f in item)
                w.emit(ind, f"{targets}, = {w.unpack(fmt)}(buf, pos)")
                w.emit(ind, f"pos += {sum(_size(f.type) for f in item)}")
            else:
                self.value(item, f"{obj}.{item.name}", ind, lens)
        if self.flex:
            self.tags(tagged, obj, ind)

    def tags(self, tagged: list[Field], obj: str, ind: int) -> None:
        """The tagged-field section ending a flexible struct; almost always the single byte 0."""
        w = self.w
        w.emit(ind, "if buf[pos]:")
        if not tagged:
            w.names.add("_read_unknown_tags")
            w.emit(ind + 1, f"pos = _read_unknown_tags(buf, pos, {obj})")
        else:
            self.known_tags(tagged, obj, ind + 1)
        w.emit(ind, "else:")
        w.emit(ind + 1, "pos += 1")
        w.emit(ind, "")

    def known_tags(self, tagged: list[Field], obj: str, ind: int) -> None:
        w = self.w
        w.names.update(("_read_uvarint", "_overrun", "_tag_size_error", "_keep_unknown_tag"))
        nt, t, size, stop = w.var("ntags"), w.var("tag"), w.var("size"), w.var("stop")
        w.emit(ind, f"{nt}, pos = _read_uvarint(buf, pos)")
        w.emit(ind, f"for _ in range({nt}):")
        w.emit(ind + 1, f"{t}, pos = _read_uvarint(buf, pos)")
        w.emit(ind + 1, f"{size}, pos = _read_uvarint(buf, pos)")
        w.emit(ind + 1, f"if {size} > end - pos:")
        w.emit(ind + 2, f"raise _overrun('tagged field ' + str({t}), {size}, end - pos, pos)")
        w.emit(ind + 1, f"{stop} = pos + {size}")
        keyword = "if"
        for f in tagged:
            w.emit(ind + 1, f"{keyword} {t} == {f.tag}:")
            self.value(f, f"{obj}.{f.name}", ind + 2)
            w.emit(ind + 2, f"if pos != {stop}:")
            w.emit(ind + 3, f"raise _tag_size_error({f.name!r}, {size}, pos)")
            keyword = "elif"
        w.emit(ind + 1, "else:")
        w.emit(ind + 2, f"_keep_unknown_tag({obj}, {t}, buf[pos:{stop}])")
        w.emit(ind + 2, f"pos = {stop}")


class _EncodeGen:
    """Emits the body of encode_<Message>_v<N>(o) -> bytes: appends parts, joins once."""

    def __init__(self, w: _Writer, version: int, flexible: bool) -> None:
        self.w = w
        self.v = version
        self.flex = flexible

    def length(self, n_expr: str, ind: int, app: str, wide: bool) -> None:
        w = self.w
        if self.flex:
            w.names.update(("_COMPACT_LENGTHS", "_compact_length"))
            n = w.var("n")
            w.emit(ind, f"{n} = {n_expr}")
            w.emit(ind, f"{app}(_COMPACT_LENGTHS[{n}] if {n} < 127 else _compact_length({n}))")
        else:
            # Lengths below LENGTH_TABLE_SIZE come from a table of pre-packed prefixes.
            table = "_LEN32" if wide else "_LEN16"
            w.names.add(table)
            n = w.var("n")
            w.emit(ind, f"{n} = {n_expr}")
            w.emit(ind, f"{app}({table}[{n}] if {n} < {LENGTH_TABLE_SIZE} else "
                        f"{w.pack('i' if wide else 'h')}({n}))")

    def if_none(self, name: str, nullable: bool, v: str, ind: int, app: str, wide: bool) -> int:
        """Emit the branch for a None value; returns the indent for encoding a present one."""
        w = self.w
        w.emit(ind, f"if {v} is None:")
        if not nullable:
            w.names.add("_not_nullable")
            w.emit(ind + 1, f"raise _not_nullable({name!r}, {self.v})")
            return ind
        if self.flex:
            w.emit(ind + 1, f"{app}(b'\\x00')")
        else:
            null = "_NULL_INT32" if wide else "_NULL_INT16"
            w.names.add(null)
            w.emit(ind + 1, f"{app}({null})")
        w.emit(ind, "else:")
        return ind + 1

    def scalar(self, f: Field, ftype: str, v: str, ind: int, app: str, nullable: bool) -> None:
        w = self.w
        if ftype == "uuid":
            w.emit(ind, f"{app}({v}.bytes)")
            return
        wide = ftype != "string"
        if ftype == "string":
            self.string(f, v, ind, app, nullable)
            return
        ind = self.if_none(f.name, nullable, v, ind, app, wide)
        if ftype == "string":
            w.emit(ind, f"{v} = {v}.encode()")
        self.length(f"len({v})", ind, app, wide)
        w.emit(ind, f"{app}({v})")

    def string(self, f: Field, v: str, ind: int, app: str, nullable: bool) -> None:
        """A string with its length prefix, from a cache of recently written strings.

        The same strings go out again and again (group, member and topic ids, protocol names, empty
        metadata); a hit costs one dict lookup instead of encode + len + prefix + two appends.
        """
        w = self.w
        cache, miss = ("_STRINGS_COMPACT", "_string_compact") if self.flex else ("_STRINGS16", "_string16")
        w.names.update((cache, miss))
        # A cached value is never empty (it holds the prefix), so `or` falls through only on a miss.
        expr = f"{cache}.get({v}) or {miss}({v}, {f.name!r}, {self.v})"
        if nullable:
            null = "b'\\x00'" if self.flex else "_NULL_INT16"
            if not self.flex:
                w.names.add("_NULL_INT16")
            expr = f"{null} if {v} is None else ({expr})"
        w.emit(ind, f"{app}({expr})")

    def value(self, f: Field, expr: str, ind: int, app: str) -> None:
        w = self.w
        v = w.var("v")
        w.emit(ind, f"{v} = {expr}")
        if f.is_array:
            ind = self.if_none(f.name, f.nullable_in(self.v), v, ind, app, True)
            self.length(f"len({v})", ind, app, True)
            elem = f.element_type
            if elem in FIXED_FORMATS:
                w.names.add("_pack")
                w.emit(ind, f"{app}(_pack('>%d{FIXED_FORMATS[elem]}' % len({v}), *{v}))")
                return
            e = w.var("e")
            w.emit(ind, f"for {e} in {v}:")
            if f.is_struct:
                self.struct(elem, f.fields, e, ind + 1, app)
            else:   # array elements are never null; nullableVersions is about the array
                self.scalar(f, elem, e, ind + 1, app, nullable=False)
        elif f.is_struct:
            w.names.add("C_" + f.element_type)
            if f.nullable_in(self.v):
                w.emit(ind, f"if {v} is None:")
                w.emit(ind + 1, f"{app}(b'\\xff')")
                w.emit(ind, "else:")
                w.emit(ind + 1, f"{app}(b'\\x01')")
                ind += 1
            else:
                w.emit(ind, f"if {v} is None:")
                w.emit(ind + 1, f"{v} = C_{f.element_type}()")
            self.struct(f.element_type, f.fields, v, ind, app)
        elif _is_fixed(f):
            w.emit(ind, f"{app}({w.pack(FIXED_FORMATS[f.type])}({v}))")
        else:
            self.scalar(f, f.type, v, ind, app, f.nullable_in(self.v))

    def struct(self, cls: str, fields: list[Field], obj: str, ind: int, app: str) -> None:
        w = self.w
        untagged, tagged = _split(fields, self.v, self.flex)
        for is_run, item in _runs(untagged):
            if is_run:
                args = ", ".join(f"{obj}.{f.name}" for f in item)
                fmt = "".join(FIXED_FORMATS[f.type] for f in item)
                w.emit(ind, f"{app}({w.pack(fmt)}({args}))")
            else:
                self.value(item, f"{obj}.{item.name}", ind, app)
        if self.flex:
            self.tags(tagged, obj, ind, app)

    def tags(self, tagged: list[Field], obj: str, ind: int, app: str) -> None:
        """Tagged fields are written only when they differ from their default (as Kafka does)."""
        w = self.w
        w.names.add("_encode_tag_section")
        known = w.var("known")
        u = w.var("unknown")
        w.emit(ind, f"{u} = {obj}._unknown_tagged_fields")
        if not tagged:
            w.emit(ind, f"{app}(_encode_tag_section(None, {u}) if {u} else b'\\x00')")
            return
        w.emit(ind, f"{known} = None")
        for f in tagged:
            v = w.var("tv")
            w.emit(ind, f"{v} = {obj}.{f.name}")
            if f.is_struct and not f.is_array:
                # A struct equal to a fresh default instance is not written, like Kafka's
                # `!this.x.equals(new X())`.
                w.names.add("C_" + f.element_type)
                cond = f"{v} is not None and {v} != C_{f.element_type}()"
            else:
                lit = w.default(f)
                cond = f"{v} is not None" if lit == "None" else f"{v} != {lit}"
            w.emit(ind, f"if {cond}:")
            parts = w.var("parts")
            w.emit(ind + 1, f"{parts} = []")
            self.value(f, v, ind + 1, f"{parts}.append")
            w.emit(ind + 1, f"if {known} is None:")
            w.emit(ind + 2, f"{known} = []")
            w.emit(ind + 1, f"{known}.append(({f.tag}, b''.join({parts})))")
        w.emit(ind, f"if {known} is None and not {u}:")
        w.emit(ind + 1, f"{app}(b'\\x00')")
        w.emit(ind, "else:")
        w.emit(ind + 1, f"{app}(_encode_tag_section({known}, {u}))")


# Arrays of flat structs guess each element's layout from the previous one (shaped_loop): only from
# this many elements on (learning costs about two elements' worth), and at most this many guesses.
SHAPE_MIN_COUNT = 3
SHAPE_LEARNS = 4


def _size(ftype: str) -> int:
    return struct.calcsize(">" + FIXED_FORMATS[ftype])


def decode_function_name(spec: MessageSpec, version: int) -> str:
    return f"decode_{spec.name}_v{version}"


def encode_function_name(spec: MessageSpec, version: int) -> str:
    return f"encode_{spec.name}_v{version}"


def codec_source(spec: MessageSpec, version: int) -> tuple[str, set[str]]:
    """Source of decode_<Name>_v<N>(buf, offset=0) and encode_<Name>_v<N>(o), plus the global names it uses.

    Flexible versions (KIP-482) use compact strings/bytes/arrays and end every struct with a
    tagged-field section.
    """
    flexible = spec.is_flexible(version)
    w = _Writer()
    w.names.add("_new")
    w.emit(0, f"# {spec.name} v{version}{' (flexible)' if flexible else ''}: generated from "
              f"Kafka's {spec.name}.json")
    # The decoder is the codec's public decode(buf, offset=0): it takes any bytes-like input and lets
    # only DecodeError escape (no wrapper call on the way in: small messages notice it).
    w.names.update(("_as_bytes", "_decode_failure"))
    w.emit(0, f"def {decode_function_name(spec, version)}(buf, offset=0):")
    w.emit(1, "if type(buf) is not bytes:")
    w.emit(2, "buf = _as_bytes(buf)")
    w.emit(1, "pos = offset")
    w.emit(1, "try:")
    w.emit(2, "end = len(buf)")
    head = len(w.lines)
    _DecodeGen(w, version, flexible, collect_classes(spec)).struct(spec.name, spec.fields, "o", 2)
    if w.uses_view:   # one view per message, not one per records field
        w.names.add("_memoryview")
        w.lines.insert(head, "        bufview = _memoryview(buf)")
    w.names.add("_past_end")
    w.emit(2, "if pos > end:")
    w.emit(3, "raise _past_end(pos, end)")
    w.emit(2, "return o, pos")
    w.emit(1, "except Exception as exc:")
    w.emit(2, f"error, cause = _decode_failure(exc, buf, {spec.name!r}, {version})")
    w.emit(2, "raise error from cause")
    w.emit(0, "")
    w.emit(0, "")
    w.emit(0, f"def {encode_function_name(spec, version)}(o):")
    w.emit(1, "parts = []")
    # parts.append(x) spelled out: CPython 3.11 specializes that call; a bound `a = parts.append` it does not.
    _EncodeGen(w, version, flexible).struct(spec.name, spec.fields, "o", 1, "parts.append")
    w.emit(1, "return b''.join(parts)")
    return "\n".join(w.lines) + "\n", w.names
