"""pyright over the serving path (pyproject's [tool.pyright]): a handler's `ctx.broker.<part>.<method>`
must resolve, so an attribute that does not exist on the composition root or its parts (or a None that
is not checked) is an error here and in `make lint` (issue #25)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # ~15 s: pyright reads broker/ and everything it imports


def pyright(*files: str) -> dict:
    """pyright's JSON report, with this checkout's config and this interpreter's packages."""
    out = subprocess.run([sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable, *files],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"pyright gave no report (exit {out.returncode}):\n{out.stdout}\n{out.stderr}")


def errors(report: dict) -> list[str]:
    return [f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']} ({d.get('rule')})"
            for d in report["generalDiagnostics"] if d["severity"] == "error"]


def test_the_serving_path_type_checks():
    report = pyright()
    assert report["summary"]["filesAnalyzed"] >= 50, report["summary"]  # broker/ and its apis
    assert not errors(report), "\n".join(errors(report))


def test_an_unknown_attribute_of_the_broker_is_an_error(tmp_path):
    bad = tmp_path / "bad_handler.py"
    bad.write_text(
        "from kcoord.broker.context import RequestContext\n"
        "from kcoord.protocol import messages as m\n\n\n"
        "async def handle(ctx: RequestContext, request: m.HeartbeatRequest):\n"
        "    ctx.broker.group_coordinator.heartbeat(request.group_id, request.member_id, None, 1)\n"  # fine
        "    ctx.broker.no_such_thing.run()\n"
        "    return ctx.broker.txn_coordinator.coordinator.no_such_method(request.no_such_field)\n")
    found = errors(pyright(str(bad)))
    assert len(found) == 3, found
    assert all("reportAttributeAccessIssue" in e for e in found), found
    assert any('"no_such_thing"' in e for e in found) and any('"no_such_method"' in e for e in found)
    assert any('"no_such_field"' in e for e in found), found
