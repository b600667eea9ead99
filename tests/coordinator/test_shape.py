"""The coordinator's shape (issue #14): small modules, composition over a tower of mixins."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
COORDINATOR = ROOT / "coordinator"
MAX_LINES = 400
OURS = ("coordinator", "protocol", "storage", "broker")


def _modules():
    return sorted(COORDINATOR.rglob("*.py"))


def _project_classes() -> set[str]:
    names = set()
    for pkg in OURS:
        for path in (ROOT / pkg).rglob("*.py"):
            names |= {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)}
    return names


def project_bases(source: str, ours: set[str]) -> dict[str, list[str]]:
    """class name -> the project classes it inherits from directly."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            bases = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                     for b in node.bases]
            out[node.name] = [b for b in bases if b in ours]
    return out


def test_no_module_is_over_400_lines():
    long = {p.relative_to(ROOT).as_posix(): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_no_class_inherits_from_more_than_one_project_class():
    ours = _project_classes()
    multiple = {f"{p.relative_to(ROOT)}:{cls}": bases for p in _modules()
                for cls, bases in project_bases(p.read_text(), ours).items() if len(bases) > 1}
    assert not multiple, multiple


def test_the_check_sees_a_mixin_tower():
    assert project_bases("class C(A, B, object): pass", {"A", "B"}) == {"C": ["A", "B"]}
