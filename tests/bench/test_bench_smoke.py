"""Smoke tests for the benchmark plumbing: behaviour, never speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from bench import __main__ as bench_main
from bench import ceiling, loadgen, runner
from bench import loadgen_wire as w


def test_table_and_save_write_markdown_and_json(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "RESULTS", tmp_path)
    result = {
        "name": "demo",
        "settings": {"cores": 2},
        "rows": [{"n": 1000, "rate": 1234.5}, {"n": 10, "x": "a"}],
    }
    md = runner.save(result)
    text = md.read_text()
    assert "### demo" in text and "cores=2" in text
    assert "| n | rate | x |" in text and "| 1,000 | 1,234 |  |" in text
    assert json.loads((tmp_path / "demo.json").read_text())["rows"][1]["x"] == "a"


def test_missing_benchmark_module_is_skipped_not_fatal():
    result, text = bench_main.run_one("no_such_bench_module", quick=True)
    assert result is None and "skipped" in text


def test_ratio_and_slope_never_crash():
    assert runner.ratio(1.0, 0) != runner.ratio(1.0, 0)  # NaN
    assert runner.fit_slope([1, 2, 3], [2, 4, 6]) == pytest.approx(2.0)


def test_quantile_mean_and_counts():
    assert runner.quantile([3, 1, 2, 4], 0.5) == pytest.approx(2.5)
    assert runner.quantile([5, 1, 9], 0.0) == 1 and runner.quantile([5, 1, 9], 1.0) == 9
    assert runner.quantile([10, 20], 0.9) == pytest.approx(19.0)
    assert runner.quantile([], 0.5) != runner.quantile([], 0.5)  # NaN
    assert runner.mean([1, None, 3]) == 2.0
    assert runner.counts([2, 1, 1, 25, 1]) == "1x3 2x1 25x1"


def test_interleaved_swaps_the_order_every_rep_and_keeps_every_result():
    calls = []

    def step(name):
        def f():
            calls.append(name)
            return f"{name}{len(calls)}"

        return f

    out = runner.interleaved({"a": step("a"), "b": step("b")}, 3, before=lambda: calls.append("-"))
    assert calls == ["-", "a", "-", "b", "-", "b", "-", "a", "-", "a", "-", "b"]
    assert out == {"a": ["a2", "a8", "a10"], "b": ["b4", "b6", "b12"]}


def _burn(seconds: float) -> float:
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:
        pass
    return time.thread_time() - t0


def test_proc_cpu_seconds_keeps_exited_threads_and_beats_the_tick():
    pid = os.getpid()
    before = runner.proc_cpu_seconds(pid)
    spent = []
    t = threading.Thread(target=lambda: spent.append(_burn(0.05)))
    t.start()
    t.join()
    after = runner.proc_cpu_seconds(pid)
    assert after - before >= spent[0]  # the thread has exited; its CPU still counts
    # ns resolution: two readings around a little work differ by less than a 10 ms tick, yet differ
    a = runner.proc_cpu_seconds(pid)
    _burn(0.001)
    b = runner.proc_cpu_seconds(pid)
    assert 0 < b - a < 0.01


def test_wait_idle_returns_for_an_idle_process():
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as p:
        try:
            time.sleep(0.3)  # past the interpreter's start
            assert runner.wait_idle(p.pid, timeout=5) < 5
        finally:
            p.kill()


@pytest.mark.parametrize("server", ["c", "python"])
def test_generator_gets_every_answer(server):
    make = (lambda: loadgen.CServer(w.HEARTBEAT_OK, lifetime=30)) if server == "c" else ceiling.PythonCeiling
    with make() as s:
        out = loadgen.drive(
            s.port, ceiling.heartbeat_frames(5), 20, 0.3, 0.1, w.HEARTBEAT_ERR_OFFSET, server_pid=s.proc.pid
        )
    assert out["conns"] == 20 and out["requests"] > 20
    assert out["errors"] == out["bad_corr"] == out["closed"] == 0
    assert 0 < out["p50_us"] <= out["p99_us"]
    assert out["server_cpu_s"] > 0 and out["gen_cpu_s"] > 0  # read inside the measured window


def test_generator_without_a_server_pid_reports_no_server_cpu():
    with loadgen.CServer(w.HEARTBEAT_OK, lifetime=30) as s:
        out = loadgen.drive(s.port, ceiling.heartbeat_frames(2), 2, 0.1, 0.05, w.HEARTBEAT_ERR_OFFSET)
    assert out["server_cpu_s"] == -1 and out["requests"] > 0


def test_hand_encoded_frames_decode_with_the_protocol_codecs():
    from kcoord.protocol import messages as m
    from kcoord.protocol.headers import decode_request_header

    body = w.join_group("g", "", 30_000, 60_000, [("range", b"\x01\x02")])
    frame = w.frame(w.JOIN_GROUP, w.JOIN_GROUP_V, 7, body)
    hdr = decode_request_header(frame[4:])
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id) == (11, 7, 7)
    req, end = m.request_codec(11, 7).decode(frame[4:], hdr.body_offset)
    assert end == len(frame) - 4
    assert (req.group_id, req.session_timeout_ms, req.member_id) == ("g", 30_000, "")
    assert req.protocols[0].name == "range" and bytes(req.protocols[0].metadata) == b"\x01\x02"

    commit = w.frame(
        w.OFFSET_COMMIT, w.OFFSET_COMMIT_V, 1, w.offset_commit("g", -1, "", "t", [(0, 5), (1, 6)])
    )
    hdr = decode_request_header(commit[4:])
    req, _ = m.request_codec(8, 8).decode(commit[4:], hdr.body_offset)
    assert [(p.partition_index, p.committed_offset) for p in req.topics[0].partitions] == [(0, 5), (1, 6)]


def test_response_parsers_read_the_protocol_encoders_output():
    from kcoord.protocol import messages as m

    resp = m.JoinGroupResponse(
        error_code=0,
        generation_id=3,
        protocol_type="consumer",
        protocol_name="range",
        leader="a",
        member_id="b",
        members=[m.JoinGroupResponse.JoinGroupResponseMember(member_id="a", metadata=b"")],
    )
    payload = b"\x00\x00\x00\x09\x00" + m.response_codec(11, 7).encode(resp)  # header v1: corr id, tags
    j = w.parse_join_group(payload)
    assert (j["error"], j["generation"], j["leader"], j["member_id"], j["members"]) == (0, 3, "a", "b", ["a"])


def test_members_form_a_group_on_a_real_server_and_heartbeat():
    """The member client speaks the protocol for real: join (MEMBER_ID_REQUIRED), sync, heartbeat."""
    from bench.loadgen_members import form_groups
    from bench.loadgen_server import KcoordServer
    from bench.runner import arun

    with KcoordServer() as server:
        arun(server.wait_ready(timeout=60))
        members = arun(form_groups(server.port, {"smoke-a": 5, "smoke-b": 3}, conns=8, timeout=60))
        assert sorted(m.group for m in members) == ["smoke-a"] * 5 + ["smoke-b"] * 3
        assert all(m.synced and m.member_id and m.generation >= 1 for m in members)
        out = loadgen.drive(
            server.port, [m.heartbeat_frame() for m in members], 8, 0.3, 0.1, w.HEARTBEAT_ERR_OFFSET
        )
    assert out["requests"] > 8 and out["errors"] == out["bad_corr"] == out["closed"] == 0


def test_load_probe_reads_serving_time_and_cpu_and_the_last_groups_offsets(tmp_path):
    """until_serving asks each partition's probe group until it answers; the empty store's
    generated partitions are served (and answer no offsets)."""
    from bench import load
    from bench.loadgen_server import KcoordServer
    from bench.runner import arun

    probes = load.probe_groups()
    assert len(probes) == load.PARTITIONS
    with KcoordServer(data_dir=str(tmp_path / "data")) as server:
        ready = arun(load.until_serving(server, probes, timeout=60))
    assert 0 < ready["cpu"] and 0 < ready["seconds"] and ready["offsets"] == {}


def test_consumer_members_form_a_group_and_their_steady_heartbeats_are_answered():
    """bench.consumer_heartbeat's members: formed over ConsumerGroupHeartbeat until Stable, then the C
    generator's steady heartbeats (id and epoch only) are answered without an error."""
    from bench import consumer_group_formation as formation
    from bench import consumer_heartbeat
    from bench.loadgen_server import KcoordServer
    from bench.runner import arun

    with KcoordServer(formation._OVERRIDES) as server:
        arun(server.wait_ready(timeout=60))
        arun(formation._create_topic(server.port, 6))
        frames = consumer_heartbeat.form_consumer_groups(server.port, 4)
        out = loadgen.drive(server.port, frames, 4, 0.3, 0.1, consumer_heartbeat.ERR_OFFSET)
    assert len(frames) == 4
    assert out["requests"] > 4 and out["errors"] == out["bad_corr"] == out["closed"] == 0


def test_uniform_assignor_bench_reports_each_size_and_the_growth_exponent():
    from bench import uniform_assignor

    result = uniform_assignor.run(quick=True)
    *sizes, exponents = result["rows"]
    assert [r["partitions"] for r in sizes] == [100, 300, 1000]
    assert all(r["+1 member, incremental ms"] > 0 and r["from nothing: per n log n vs smallest"] > 0 for r in sizes)
    assert exponents["members"].startswith("exponent") and exponents["from nothing ms"] == exponents["from nothing ms"]


def test_formation_inprocess_forms_both_groups_and_reports_the_ratio():
    """bench.formation_inprocess: a KIP-848 group of 100 reaches Stable (in a few rounds of heartbeats)
    and the classic baseline forms; each row carries both medians and their ratio."""
    from bench import formation_inprocess

    assert 1 <= formation_inprocess.consumer_formation(100) <= 5
    (row,) = formation_inprocess.run(quick=True)["rows"]
    assert row["members"] == 100 and row["KIP-848 s"] > 0 and row["classic s (baseline)"] > 0 and row["ratio"] > 0
