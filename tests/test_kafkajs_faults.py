"""kafkajs (Node) under faults it injects itself through the admin endpoint (tests/js/admin_faults.js):
a SyncGroup answered late, and OffsetCommit answered with a retriable and a non-retriable error.

kafkajs 2.2.4's behaviour asserted here: a slow SyncGroup is waited for (requestTimeout 30 s); an
OffsetCommit answered NOT_COORDINATOR is retried after a coordinator lookup; one answered
GROUP_AUTHORIZATION_FAILED rejects commitOffsets (KafkaJSNonRetriableError, caused by that error). The broker side follows Kafka:
an OffsetCommit that fails stores nothing (GroupCoordinator.handleCommitOffsets answers per partition)."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import pytest

JS_DIR = pathlib.Path(__file__).resolve().parent / "js"


@pytest.mark.kcoord(overrides={"num.partitions": "1"})
def test_kafkajs_under_injected_faults(kafka_broker):
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed: run scripts/ensure-test-tools.sh (make test does it)")
    run = subprocess.run([node, str(JS_DIR / "admin_faults.js"), kafka_broker.bootstrap_servers,
                          kafka_broker.admin_url, "js-events"], capture_output=True, text=True, timeout=180,
                         cwd=JS_DIR)
    events = {e["ev"]: e for e in map(json.loads, filter(None, run.stdout.splitlines()))}
    assert run.returncode == 0, (run.stdout, run.stderr)

    slow = events["slow_sync"]
    assert slow["fired"] == 1 and slow["consumed"] == 10
    assert slow["joinMs"] >= 1500  # the group was joined only once the delayed SyncGroup was answered

    retried = events["commit_retriable"]
    assert (retried["outcome"], retried["fired"], retried["committed"]) == ("ok", 1, 10)

    refused = events["commit_refused"]
    assert refused["fired"] == 1
    assert refused["outcome"] == {"name": "KafkaJSNonRetriableError", "type": "GROUP_AUTHORIZATION_FAILED"}
    assert refused["committed"] == 10  # the refused commit (offset 5) stored nothing
    log = kafka_broker.log_text()
    assert "fault 1 fired (delay 1500 ms, 1 of 1): SyncGroup" in log
    assert "fault 2 fired (NOT_COORDINATOR, 1 of 1): OffsetCommit" in log and "client_id='js-app'" in log
