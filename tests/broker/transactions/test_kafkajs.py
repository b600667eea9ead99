"""kafkajs's transactional producer commits and aborts against kcoord; its read_committed consumer skips
the aborted records (the aborted transactions list of Fetch v4+, KIP-98), its read_uncommitted one sees
them."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

JS_DIR = pathlib.Path(__file__).resolve().parents[2] / "js"


def test_kafkajs_transactions(kcoord_server_factory):
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed: run `cd tests/js && npm install` (make tools does it)")
    server = kcoord_server_factory({"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"})
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic("js-txn", 1, 1)])
    admin.close()
    run = subprocess.run([node, str(JS_DIR / "transactions.js"), server.bootstrap, "js-txn"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["committed"] == ["c1", "c2", "c3"]
    assert result["uncommitted"] == ["c1", "c2", "a1", "c3"]
