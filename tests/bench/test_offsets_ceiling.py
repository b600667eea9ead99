"""The durable-commit ceiling the offsets benchmark compares kcoord with: behaviour, never speed."""

from __future__ import annotations

import os

from bench import loadgen, offsets, offsets_ceiling
from bench import loadgen_wire as w


def test_fixed_answer_is_a_valid_offset_commit_response():
    from kcoord.protocol import messages as m
    from kcoord.protocol.headers import decode_response_header

    frame = offsets_ceiling.commit_response("t", 3)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    corr, at = decode_response_header(frame[4:], w.OFFSET_COMMIT, w.OFFSET_COMMIT_V)
    resp, end = m.response_codec(w.OFFSET_COMMIT, w.OFFSET_COMMIT_V).decode(frame[4:], at)
    assert corr == 0 and end == len(frame) - 4
    [topic] = resp.topics
    assert topic.name == "t" and [(p.partition_index, p.error_code) for p in topic.partitions] == [
        (0, 0), (1, 0), (2, 0)]


def test_every_commit_is_answered_and_written(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the server's store goes here, and is removed at close
    with offsets_ceiling.DurableCeiling(parts=2) as server:
        out = loadgen.drive(server.port, offsets.commit_frames(2), 10, 0.3, 0.1, w.commit_err_offset(offsets.TOPIC))
        stores = [p for p in tmp_path.iterdir() if p.name.startswith("kcoord-bench-offsets-ceiling-")]
        assert len(stores) == 1
        logs = [f for d in stores[0].iterdir() if d.is_dir() for f in d.iterdir() if f.suffix == ".log"]
        assert sum(os.path.getsize(f) for f in logs) > 0
    assert out["conns"] == 10 and out["requests"] > 10
    assert out["errors"] == out["bad_corr"] == out["closed"] == 0
    assert not list(tmp_path.iterdir())  # closed cleanly: SIGTERM closes and removes the store
