"""Imports point one way (ARCHITECTURE.md, "One name, folders that show jobs"):

    protocol <- storage <- (coordinator, txn) <- metadata <- cluster <- broker <- (tools, testkit)

observability is importable by the serving path and above and imports nothing of ours; analytics uses
protocol and storage only; txn may import kcoord.coordinator.common (what the two coordinators' runtimes
share, Kafka's coordinator-common), a leaf of the coordinator, and nothing else of it; nothing in kcoord
imports tools, testkit, analytics,
bench or tests. Every package is imported as `kcoord.<package>`: a bare `import storage` is an error
here as it is for ruff (TID251).
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BELOW_BROKER = {"protocol", "storage", "coordinator", "txn", "share", "metadata", "cluster", "observability"}
ALLOWED = {
    "protocol": set(),
    "storage": {"protocol"},
    "coordinator": {"protocol", "storage"},
    "txn": {"protocol", "storage"},
    # the share coordinator's side of share groups (KIP-932): share-partition state and its
    # __share_group_state records; pure (records out, replay in), so it needs the codecs only
    "share": {"protocol"},
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
# Subpackages a package may import although their package is not in its ALLOWED set: Kafka's
# coordinator-common, shared by the group and the transaction coordinators. It must stay a leaf (imports
# only what its package may: test_shared_subpackages_are_leaves), so txn does not come to depend on the
# group coordinator through it.
ALLOWED_SUBPACKAGES = {"txn": {"kcoord.coordinator.common"}}
PACKAGES = set(ALLOWED)  # each a real folder at the repository's top, src/kcoord/<name> links to it
OUTSIDE = {"bench", "tests", "fuzz"}  # beside kcoord, never in the wheel; they may import any of it
# Upward imports that are known and waiting for their fix (issue #25); each entry must still be
# needed (test_known_exceptions_are_still_needed), so a fix removes it here too.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()
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
            if any(module == sub or module.startswith(sub + ".") for sub in ALLOWED_SUBPACKAGES.get(pkg, ())):
                continue
            if (rel(path), module) in KNOWN_EXCEPTIONS:
                continue
            bad.append(f"{rel(path)}:{lineno} imports {module}")
    assert not bad, "layering violated:\n" + "\n".join(bad)


@pytest.mark.parametrize("sub", sorted(set().union(*ALLOWED_SUBPACKAGES.values())))
def test_shared_subpackages_are_leaves(sub):
    """A shared subpackage imports nothing of its own package outside itself, and only what that package
    may import: whoever may import it does not get the rest of the package through it."""
    pkg = sub.split(".")[1]
    folder = ROOT.joinpath(*sub.split(".")[1:])
    bad = []
    for path in sorted(folder.rglob("*.py")):
        for lineno, module in imported_modules(path):
            top = layer_of(module)
            if top is None or top == "kcoord" or top in ALLOWED[pkg] or module == sub or module.startswith(sub + "."):
                continue
            bad.append(f"{rel(path)}:{lineno} imports {module}")
    assert folder.is_dir() and not bad, f"{sub} must stay a leaf:\n" + "\n".join(bad)


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


# --------------------------------------------------------------- no import cycle inside coordinator/

def coordinator_import_graph(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """module -> the coordinator modules it imports: every `import` / `from ... import` anywhere in the
    file (under `if TYPE_CHECKING:`, inside functions); `from kcoord.coordinator.x import y` imports
    kcoord.coordinator.x.y when y is a submodule, else kcoord.coordinator.x. As for `import a.b.c`, the
    parent packages a module runs on the way are not counted. Relative imports are resolved too."""
    paths = sorted((root / "coordinator").rglob("*.py"))
    names = {module_name_under(root, p): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in names else base
                               for alias in node.names)
        graph[name] = {t for t in targets if t in names and t != name}
    return graph


def module_name_under(root: pathlib.Path, path: pathlib.Path) -> str:
    """`<root>/coordinator/consumer/manager.py` -> "kcoord.coordinator.consumer.manager" (its import name)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(("kcoord",) + (parts[:-1] if parts[-1] == "__init__" else parts))


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> ... -> a) per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [cycle_in(graph, component) for component in components]


def cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first, inside the component)."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w not in came_from:
                    came_from[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"no cycle in the component {sorted(component)}")


def test_no_import_cycles_in_the_coordinator():
    """The classic steps form a one-way chain under GroupMetadataManager, the consumer steps one under
    ConsumerGroupManager (coordinator/classic_context.py, coordinator/consumer/context.py)."""
    graph = coordinator_import_graph()
    assert "kcoord.coordinator.join" in graph and "kcoord.coordinator.consumer.manager" in graph  # saw the tree
    assert "kcoord.coordinator.consumer.heartbeat" in graph["kcoord.coordinator.consumer.classic_members"]
    cycles = import_cycles(graph)
    assert not cycles, "import cycles in coordinator/:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_can_fail(tmp_path):
    pkg = tmp_path / "coordinator"
    (pkg / "steps").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "steps" / "__init__.py").write_text("")
    (pkg / "manager.py").write_text("from kcoord.coordinator.steps import join\n")
    (pkg / "steps" / "join.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                           "    from kcoord.coordinator.manager import Manager\n")
    (pkg / "leaf.py").write_text("def f():\n    from . import manager\n")
    (pkg / "steps" / "sync.py").write_text("from ..leaf import f\n")
    graph = coordinator_import_graph(tmp_path)
    assert graph["kcoord.coordinator.leaf"] == {"kcoord.coordinator.manager"}
    assert graph["kcoord.coordinator.steps.sync"] == {"kcoord.coordinator.leaf"}
    assert import_cycles(graph) == [["kcoord.coordinator.manager", "kcoord.coordinator.steps.join",
                                     "kcoord.coordinator.manager"]]
    graph["kcoord.coordinator.steps.join"] = set()
    assert import_cycles(graph) == []
    assert import_cycles({"a": {"b"}, "b": set()}) == []
