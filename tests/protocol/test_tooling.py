"""kcoord.protocol.dump, lazy import, and the fuzz target's fallback loop."""
from __future__ import annotations

import subprocess
import sys

from fuzz.fuzz_decode import random_fuzz
from kcoord.protocol.dump import dump, main


def test_dump_prints_classes_and_the_versions_codec(capsys):
    assert main(["JoinGroupRequest", "5"]) == 0
    out = capsys.readouterr().out
    assert "class JoinGroupRequest:" in out
    assert "class JoinGroupRequestProtocol:" in out
    assert "def decode_JoinGroupRequest_v5(buf, offset=0):" in out
    assert "def encode_JoinGroupRequest_v5(o):" in out
    assert "reason" in dump("JoinGroupRequest")      # v8+ field is part of the shared class


def test_dump_refuses_unknown_messages_and_versions(capsys):
    assert main(["NoSuchRequest", "1"]) == 1
    assert main(["HeartbeatRequest", "99"]) == 1
    assert main([]) == 2


def test_dump_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "kcoord.protocol.dump", "HeartbeatResponse", "4"],
                         capture_output=True, text=True, check=True).stdout
    assert "def decode_HeartbeatResponse_v4(buf, offset=0):" in out


def test_importing_messages_reads_no_schema_and_compiles_nothing():
    code = ("import kcoord.protocol.messages, kcoord.protocol.headers, kcoord.protocol.framing\n"
            "from kcoord.protocol.schema import load_spec\n"
            "from kcoord.protocol import messages\n"
            "print(load_spec.cache_info().currsize, messages.codec.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "0"]


def test_fuzz_fallback_loop_finds_nothing_but_decode_errors():
    random_fuzz(runs=3000, seed=7)
