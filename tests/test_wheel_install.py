"""Installed, kcoord is one import name (issue #25's acceptance): the built wheel holds `kcoord/...` and
its dist-info only, and a project with its own `storage`, `protocol`, `broker`, `analytics` and
`coordinator` packages that installs it runs a test with the `kafka_broker` fixture while its own
imports still resolve to its own packages.

No network: the wheel is built without build isolation from a copy of the packaging inputs (so the
checkout gets no build/ or egg-info), and installed with --no-deps into a venv whose other packages
come from this test's environment through a path entry (a .pth line, so that environment's own .pth
files, an editable kcoord among them, are not run).
"""
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "kcoord"
APP_PACKAGES = ("storage", "protocol", "broker", "analytics", "coordinator")
# kcoord's subpackages: the folders src/kcoord links to
SUBPACKAGES = tuple(sorted(p.name for p in SRC.iterdir() if p.is_symlink()))

pytestmark = pytest.mark.slow

USER_TEST = '''
import pathlib

import broker
import protocol
import storage
from kafka import KafkaProducer

HERE = pathlib.Path(__file__).resolve().parent


def test_own_packages_resolve_to_the_project():
    import analytics
    import coordinator
    for module in (storage, protocol, broker, analytics, coordinator):
        assert pathlib.Path(module.__file__).resolve().parent.parent == HERE, module.__file__
        assert module.OWNER == "the project"


def test_kafka_broker_fixture(kafka_broker):
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    producer.send("events", b"hello").get(timeout=30)
    producer.close()
'''


def _run(cmd, **kwargs):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done


def _copy_packaging_inputs(dest: pathlib.Path) -> None:
    """pyproject, README and src/kcoord with its symlinks, beside copies of the folders they point at."""
    dest.mkdir(parents=True)
    shutil.copy2(ROOT / "pyproject.toml", dest)
    shutil.copy2(ROOT / "README.md", dest)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    (dest / "src" / "kcoord").mkdir(parents=True)
    for entry in SRC.iterdir():
        if entry.is_symlink():
            shutil.copytree(entry.resolve(), dest / entry.resolve().relative_to(ROOT), ignore=ignore)
            (dest / "src" / "kcoord" / entry.name).symlink_to(os.readlink(entry))
        elif entry.is_file():
            shutil.copy2(entry, dest / "src" / "kcoord" / entry.name)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    pytest.importorskip("setuptools", minversion="70.1", reason="bdist_wheel without the `wheel` package")
    work = tmp_path_factory.mktemp("wheel-build")
    _copy_packaging_inputs(work / "project")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
          "-q", "-w", work / "dist", work / "project"])
    (found,) = (work / "dist").glob("kcoord-*.whl")
    return found


def test_the_wheel_holds_only_kcoord(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"kcoord", next(t for t in tops if t.endswith(".dist-info"))}, sorted(tops)
    for pkg in SUBPACKAGES:
        assert f"kcoord/{pkg}/__init__.py" in names, pkg
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt")))
    assert b"kcoord = kcoord.tools.cli:main" in entry_points
    assert b"kcoord = kcoord.testkit.pytest_plugin" in entry_points


def test_a_project_with_clashing_packages_uses_the_fixture(wheel, tmp_path):
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    # without PYTHONPATH, which would show pip this checkout's kcoord as installed already
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel],
         env=_clean_env())
    venv_site = pathlib.Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  env=_clean_env()).stdout.strip())
    # this test environment's packages (pytest, kafka-python, uvloop, ...) after the venv's own. A path
    # line of a .pth file is not a site directory: the .pth files in it (this checkout's editable
    # install among them, when the venv is .venv here) are not run.
    test_env = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    (venv_site / "zz_test_env.pth").write_text("\n".join(test_env) + "\n")

    project = tmp_path / "project"
    for name in APP_PACKAGES:
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text('OWNER = "the project"\n')
    (project / "test_app.py").write_text(textwrap.dedent(USER_TEST))

    # from outside any checkout: kcoord imports, the bare names of its folders do not
    probe = ("import importlib.util, kcoord.coordinator, kcoord.testkit.pytest_plugin\n"
             "assert '/site-packages/kcoord/' in kcoord.coordinator.__file__, kcoord.coordinator.__file__\n"
             f"missing = [n for n in {(*SUBPACKAGES, 'bench')!r} if importlib.util.find_spec(n)]\n"
             "assert not missing, missing\n")
    _run([python, "-c", probe], cwd=tmp_path, env=_clean_env())

    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W",
                           "ignore::DeprecationWarning", "test_app.py"], cwd=project, env=_clean_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH: nothing of this checkout may leak into the user's venv."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
