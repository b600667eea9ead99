"""The command line, where it does not need Spark: usage, and a clear refusal without segments."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(*args):
    return subprocess.run([sys.executable, "-m", "kcoord.analytics", *args], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), str(ROOT)])))


def test_usage_names_the_commands_and_options():
    r = run("--help")
    assert r.returncode == 0
    for word in ("ingest", "report", "health", "all", "--log-dirs", "--out", "--since", "--until",
                 "--group-filter", "--master"):
        assert word in r.stdout


def test_no_segments_is_an_error_with_a_reason(tmp_path):
    r = run("all", "--log-dirs", str(tmp_path), "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    assert "no segments found" in r.stderr


def test_a_bad_time_is_refused():
    r = run("health", "--log-dirs", "x", "--until", "yesterday-ish")
    assert r.returncode == 2 and "--until" in r.stderr
