"""`make run` — the README's first command — starts a server real clients talk to, and Ctrl-C stops it."""

import os
import pathlib
import re
import shutil
import signal
import subprocess
import time

import pytest
from kafka import KafkaAdminClient

ROOT = pathlib.Path(__file__).resolve().parent.parent
READY = re.compile(rb"kcoord ready: listening on (\S+?):(\d+)")


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "kcoord").exists() or shutil.which("make") is None,
                    reason="`make run` needs the project's .venv (made by `make install` / `make test`)")
def test_make_run_serves_kafka_python_and_stops_on_ctrl_c(tmp_path):
    args = f"--override listeners=PLAINTEXT://127.0.0.1:0 --override log.dirs={tmp_path / 'data'}"
    # Its own process group, like a terminal's foreground job: Ctrl-C signals make and the server alike.
    proc = subprocess.Popen(["make", "--no-print-directory", "run", f"ARGS={args}"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    output = b""
    try:
        deadline = time.monotonic() + 60
        match = None
        while match is None and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            output += line
            match = READY.search(line)
        assert match, f"no ready line from make run:\n{output.decode(errors='replace')}"
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{int(match.group(2))}", client_id="make-run-test")
        try:
            assert isinstance(admin.list_topics(), list)  # a Metadata round trip after ApiVersions
        finally:
            admin.close()
        os.killpg(proc.pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        output += rest
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = output.decode(errors="replace")
    assert "kcoord stopped" in text, text
    assert "Traceback" not in text, text
