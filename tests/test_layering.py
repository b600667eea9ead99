"""Imports point one way (ARCHITECTURE.md, "One name, folders that show jobs"):

    protocol <- storage <- (coordinator, txn) <- metadata <- cluster <- broker <- (tools, testkit)

observability is importable by the serving path and above and imports nothing of ours; analytics uses
protocol and storage only; nothing in kcoord imports tools, testkit, analytics,
bench or tests. Every package is imported as `kcoord.<package>`: a bare `import storage` is an error
here as it is for ruff (TID251).
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BELOW_BROKER = {"protocol", "storage", "coordinator", "txn", "metadata", "cluster", "observability"}
ALLOWED = {
    "protocol": set(),
    "storage": {"protocol"},
    "coordinator": {"protocol", "storage"},
    "txn": {"protocol", "storage"},
    "observability": set(),
    "metadata": {"protocol", "storage", "coordinator", "txn"},
    # the cluster (etcd store, controller, replication) sees the metadata store's interface and storage;
    # the serving path wires it to the coordinators (load / unload on leadership), never the reverse
    "cluster": {"protocol", "storage", "metadata", "observability"},
    "broker": BELOW_BROKER,
    # tools/cli.py runs `kcoord analyze` as `python -m kcoord.analytics` (a process, not an import)
    "tools": BELOW_BROKER | {"broker"},
    "testkit": BELOW_BROKER | {"broker"},
    "analytics": {"protocol", "storage"},
}
PACKAGES = set(ALLOWED)  # each a real folder at the repository's top, src/kcoord/<name> links to it
OUTSIDE = {"bench", "tests", "fuzz"}  # beside kcoord, never in the wheel; they may import any of it
# Upward imports that are known and waiting for their fix (issue #25); each entry must still be
# needed (test_known_exceptions_are_still_needed), so a fix removes it here too.
KNOWN_EXCEPTIONS = {
    # the dynamic broker config store parses values with the broker's property table; fix: hand it the
    # table (DynamicBrokerConfigs(path, properties)) from broker/app.py, or move the table below.
    ("metadata/dynamic_broker_configs.py", "kcoord.broker.config"),
    # the SCRAM credential store keeps ScramCredential / HASHES, defined with the SASL exchange;
    # fix: define the credential (and HASHES) in metadata/scram_store.py, scram.py imports them.
    ("metadata/scram_store.py", "kcoord.broker.security.scram"),
}
# Pure coordinator modules must not touch the event loop or sockets; only its runtime (the
# coordinator/runtime/ package: binding to asyncio + storage, and when checkpoints are written) does.
COORDINATOR_RUNTIME = "runtime"
IO_MODULES = {"asyncio", "socket", "uvloop", "selectors", "threading"}


def imported_modules(path: pathlib.Path):
    """(line, dotted module) for every absolute import in the file, function-level ones included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def layer_of(module: str) -> str | None:
    """The package of ours a dotted module name belongs to: `kcoord.storage.fs` -> "storage",
    `bench.fixture` -> "bench"; "kcoord" for the root package itself; None for everything else."""
    parts = module.split(".")
    if parts[0] == "kcoord":
        return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "kcoord"
    if parts[0] in OUTSIDE:
        return parts[0]
    return None


def package_files(pkg):
    return sorted((ROOT / pkg).rglob("*.py"))


def rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("pkg", sorted(ALLOWED))
def test_imports_point_one_way(pkg):
    bad = []
    for path in package_files(pkg):
        for lineno, module in imported_modules(path):
            top = layer_of(module)
            if top is None or top in ("kcoord", pkg) or top in ALLOWED[pkg]:
                continue
            if (rel(path), module) in KNOWN_EXCEPTIONS:
                continue
            bad.append(f"{rel(path)}:{lineno} imports {module}")
    assert not bad, "layering violated:\n" + "\n".join(bad)


@pytest.mark.parametrize("folder", sorted(PACKAGES | OUTSIDE))
def test_no_bare_package_names(folder):
    """`import storage` would find an application's own `storage` once kcoord is installed."""
    bad = [f"{rel(path)}:{lineno} imports {module}" for path in package_files(folder)
           for lineno, module in imported_modules(path) if module.split(".")[0] in PACKAGES]
    assert not bad, "import kcoord.<package> instead:\n" + "\n".join(bad)


def test_known_exceptions_are_still_needed():
    stale = [f"{file} -> {module}" for file, module in sorted(KNOWN_EXCEPTIONS)
             if module not in {m for _, m in imported_modules(ROOT / file)}]
    assert not stale, "fixed: remove from KNOWN_EXCEPTIONS:\n" + "\n".join(stale)


def test_every_package_is_linked_into_kcoord():
    src = ROOT / "src" / "kcoord"
    for pkg in sorted(PACKAGES):
        link = src / pkg
        assert link.is_symlink() and link.resolve() == (ROOT / pkg).resolve(), f"src/kcoord/{pkg}"
    assert {p.name for p in src.iterdir() if p.is_dir() and p.name != "__pycache__"} == PACKAGES


def test_pure_coordinator_does_no_io():
    bad = []
    for path in package_files("coordinator"):
        if path.relative_to(ROOT / "coordinator").parts[0] == COORDINATOR_RUNTIME:
            continue
        for lineno, module in imported_modules(path):
            if module.split(".")[0] in IO_MODULES:
                bad.append(f"{rel(path)}:{lineno} imports {module}")
    assert not bad, "pure coordinator modules must not do I/O:\n" + "\n".join(bad)


def test_pure_transaction_coordinator_does_no_io():
    """txn/ as coordinator/: only txn/runtime.py binds it to asyncio and storage."""
    bad = [f"{rel(path)}:{lineno} imports {module}" for path in package_files("txn")
           if path.name != "runtime.py" for lineno, module in imported_modules(path)
           if module.split(".")[0] in IO_MODULES or layer_of(module) == "storage"]
    assert not bad, "pure transaction-coordinator modules must not do I/O:\n" + "\n".join(bad)


def test_the_check_can_fail(tmp_path):
    # The checker itself must see a forbidden import, qualified or bare.
    p = tmp_path / "x.py"
    p.write_text("import os\nfrom kcoord.broker.server import x\nimport storage.fs\n")
    assert [layer_of(m) for _, m in imported_modules(p)] == [None, "broker", None]
    assert "storage" in {m.split(".")[0] for _, m in imported_modules(p)}
