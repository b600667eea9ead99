"""Imports point one way: protocol <- storage <- coordinator <- broker; analytics uses protocol and
storage only; nothing imports broker, analytics or bench (ARCHITECTURE.md)."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
OURS = {"protocol", "storage", "coordinator", "txn", "broker", "analytics", "bench"}
ALLOWED = {
    "protocol": set(),
    "storage": {"protocol"},
    "coordinator": {"protocol", "storage"},
    "txn": {"protocol", "storage"},
    "broker": {"protocol", "storage", "coordinator", "txn"},
    "analytics": {"protocol", "storage"},
    "bench": OURS - {"bench"},
}
# Pure coordinator modules must not touch the event loop or sockets; only its runtime (the
# coordinator/runtime/ package: binding to asyncio + storage, and when checkpoints are written) does.
COORDINATOR_RUNTIME = "runtime"


def imported_top_levels(path: pathlib.Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def package_files(pkg):
    return sorted((ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_imports_point_one_way(pkg):
    bad = []
    for path in package_files(pkg):
        for lineno, top in imported_top_levels(path):
            if top in OURS and top != pkg and top not in ALLOWED[pkg]:
                bad.append(f"{path.relative_to(ROOT)}:{lineno} imports {top}")
    assert not bad, "layering violated:\n" + "\n".join(bad)


def test_pure_coordinator_does_no_io():
    bad = []
    for path in package_files("coordinator"):
        if path.relative_to(ROOT / "coordinator").parts[0] == COORDINATOR_RUNTIME:
            continue
        for lineno, top in imported_top_levels(path):
            if top in {"asyncio", "socket", "uvloop", "selectors", "threading"}:
                bad.append(f"{path.relative_to(ROOT)}:{lineno} imports {top}")
    assert not bad, "pure coordinator modules must not do I/O:\n" + "\n".join(bad)


def test_pure_transaction_coordinator_does_no_io():
    """txn/ as coordinator/: only txn/runtime.py binds it to asyncio and storage."""
    bad = [f"{path.relative_to(ROOT)}:{lineno} imports {top}" for path in package_files("txn")
           if path.name != "runtime.py" for lineno, top in imported_top_levels(path)
           if top in {"asyncio", "socket", "uvloop", "selectors", "threading", "storage"}]
    assert not bad, "pure transaction-coordinator modules must not do I/O:\n" + "\n".join(bad)


def test_the_check_can_fail(tmp_path):
    # The checker itself must see a forbidden import.
    p = tmp_path / "x.py"
    p.write_text("import os\nfrom broker.server import x\n")
    assert ("broker" in {top for _, top in imported_top_levels(p)})
