"""Print the generated source of a message's classes and codec.

    python -m kcoord.protocol.dump JoinGroupRequest 5
    python -m kcoord.protocol.dump JoinGroupRequest          # classes only
"""
from __future__ import annotations

import sys

from kcoord.protocol import codegen, messages
from kcoord.protocol.schema import load_spec


def dump(name: str, version: int | None = None) -> str:
    """The generated classes of `name` and, given a version, its codec for that version."""
    messages.message_class(name)          # refuses names we do not serve
    spec = load_spec(name)
    parts = [codegen.class_source(cs) for cs in codegen.collect_classes(spec).values()]
    if version is not None:
        parts.append(messages.codec(name, version).source)
    return "\n\n".join(parts)


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        print(dump(argv[0], int(argv[1]) if len(argv) == 2 else None))
    except (KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
