"""How the command-line tools that talk to a broker (`kcoord groups`, `kcoord users`) end: 0, or 1 with one
line on stderr — the tool's own refusal, or why the broker could not be reached (as Kafka's tools print)."""
from __future__ import annotations

import sys
from collections.abc import Callable

from kcoord.protocol.client import WireError
from kcoord.tools.client_login import LoginFailed


def run_tool(bootstrap: str, action: Callable[[], None], tool_error: type[Exception]) -> int:
    try:
        action()
    except tool_error as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except (OSError, WireError, LoginFailed) as exc:
        print(f"Error: cannot talk to {bootstrap}: {exc}", file=sys.stderr)
        return 1
    return 0
