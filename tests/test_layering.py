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


# --------------------------------------------------------------- no import cycle inside coordinator/

# TODO(issue 25): coordinator/consumer's run-time cycle (manager <-> heartbeat <-> classic_members <->
# migration; manager hides its import inside __init__) is to be broken separately. Until then a cycle
# is tolerated only if every module in it is one of exactly these four; any other cycle fails.
KNOWN_CYCLE_TODO = {
    "coordinator.consumer.manager",
    "coordinator.consumer.heartbeat",
    "coordinator.consumer.classic_members",
    "coordinator.consumer.migration",
}


def coordinator_import_graph(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """module -> the coordinator modules it imports: every `import` / `from ... import` anywhere in the
    file (under `if TYPE_CHECKING:`, inside functions); `from coordinator.x import y` imports
    coordinator.x.y when y is a submodule, else coordinator.x. As for `import coordinator.x.y`, the
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
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(graph: dict[str, set[str]], tolerated: frozenset[str] = frozenset()) -> list[list[str]]:
    """One cycle (a -> ... -> a) per strongly connected component of more than one module (Tarjan),
    except for components made only of `tolerated` modules."""
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
            if len(component) > 1 and not component <= tolerated:
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
    """The classic steps form a one-way chain under GroupMetadataManager (ARCHITECTURE.md)."""
    graph = coordinator_import_graph()
    assert "coordinator.join" in graph and "coordinator.consumer.manager" in graph  # the walk saw the tree
    cycles = import_cycles(graph, frozenset(KNOWN_CYCLE_TODO))
    assert not cycles, "import cycles in coordinator/:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_can_fail(tmp_path):
    pkg = tmp_path / "coordinator"
    (pkg / "steps").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "steps" / "__init__.py").write_text("")
    (pkg / "manager.py").write_text("from coordinator.steps import join\n")
    (pkg / "steps" / "join.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                           "    from coordinator.manager import Manager\n")
    (pkg / "leaf.py").write_text("def f():\n    from . import manager\n")
    (pkg / "steps" / "sync.py").write_text("from ..leaf import f\n")
    graph = coordinator_import_graph(tmp_path)
    assert graph["coordinator.leaf"] == {"coordinator.manager"}
    assert graph["coordinator.steps.sync"] == {"coordinator.leaf"}
    assert import_cycles(graph) == [["coordinator.manager", "coordinator.steps.join", "coordinator.manager"]]
    assert import_cycles(graph, frozenset({"coordinator.manager", "coordinator.steps.join"})) == []
    # a tolerated cycle that grows to take in another module fails again
    graph["coordinator.leaf"] = {"coordinator.steps.join"}
    graph["coordinator.steps.join"] |= {"coordinator.leaf"}
    assert import_cycles(graph, frozenset({"coordinator.manager", "coordinator.steps.join"})) == [
        ["coordinator.leaf", "coordinator.steps.join", "coordinator.leaf"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
