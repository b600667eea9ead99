"""Share groups (KIP-932) in the analytics: `__share_group_state` records (ShareSnapshot / ShareUpdate, in
Kafka's formats: share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json)
decoded and replayed per share-partition into deliveries, redeliveries, completed, rejections and
releases-or-lock-expiries; the report shows them.

The decoder and the replay are checked on records kcoord's own share coordinator encodes (no Spark); the
pipeline on a real kcoord's store after ShareFetch / ShareAcknowledge at the wire (ACCEPT, RELEASE and
REJECT as SharePartition.acknowledge settles them)."""
from __future__ import annotations

import uuid

import pytest

from kcoord.analytics import share_records
from kcoord.share import records as r

TID = uuid.UUID(int=7)


def _encoded(record):
    k, v, _h = r.encode(record)
    return share_records.decode(k, v)


def test_decode_reads_kcoords_share_records():
    snap = r.ShareStateRecord(r.SHARE_SNAPSHOT, "g", TID, 3, 2, 5, 10, (r.StateBatch(10, 12, 0, 1),), 4, 1, 100, 200)
    update = r.ShareStateRecord(r.SHARE_UPDATE, "g", TID, 3, 2, 6, -1, (r.StateBatch(11, 11, 2, 2),), 5)
    assert _encoded(snap) == {"record_type": 0, "group": "g", "topic_id": str(TID), "partition": 3, "tombstone": False,
                              "snapshot_epoch": 2, "leader_epoch": 5, "start_offset": 10,
                              "state_batches": [(10, 12, 0, 1)]}
    assert _encoded(update)["state_batches"] == [(11, 11, 2, 2)] and _encoded(update)["start_offset"] == -1
    assert share_records.decode(r.snapshot_key("g", TID, 3), None)["tombstone"] is True
    assert share_records.row(b"\x00\x09junk", b"", (0, 0, 0)) is None  # another record type


def test_replay_counts_deliveries_from_the_written_delivery_counts():
    def rec(start, *batches, tombstone=False):
        return {"tombstone": tombstone, "start_offset": start, "state_batches": list(batches), "timestamp": 1}

    stats = share_records.replay([
        rec(0),                                                   # initialized at 0
        rec(-1, (0, 3, 2, 1), (4, 5, 0, 1), (6, 6, 4, 1)),       # 0-3 accepted, 4-5 released, 6 rejected
        rec(-1, (4, 4, 0, 2)),                                    # 4 delivered again, its lock ran out
        rec(7, (4, 5, 2, 3)),                                     # both accepted at last
    ])
    assert {k: stats[k] for k in ("deliveries", "redeliveries", "completed", "rejections",
                                  "releases_or_lock_expiries", "start_offset", "records")} == {
        "deliveries": 4 + 3 + 3 + 1, "redeliveries": 4, "completed": 7, "rejections": 1,
        "releases_or_lock_expiries": 3, "start_offset": 7, "records": 4}
    # settled at the window's start: not written, the start offset passes them (once more than last written)
    passed = share_records.replay([rec(0), rec(2), rec(-1, (2, 2, 0, 1)), rec(3)])
    assert (passed["deliveries"], passed["redeliveries"], passed["completed"]) == (4, 1, 3)
    assert share_records.replay([rec(0, (0, 0, 2, 1)), rec(None, tombstone=True)])["deliveries"] == 0


@pytest.mark.spark
@pytest.mark.slow
def test_pipeline_and_report_show_a_share_group(tmp_path, spark):
    from kcoord.analytics import cli
    from kcoord.protocol.client import KafkaWireClient
    from tests.broker.groups.group_server import start_group_server
    from tests.broker.share.test_share_fetch_wire import ACCEPT, REJECT, RELEASE, acquired, earliest, fetch

    server = start_group_server(tmp_path, name="share-analytics")
    try:
        server.create_topic("jobs", 1)
        server.produce_keyed("jobs", 10)
        earliest(server, "workers")
        with KafkaWireClient.connect(server.bootstrap, timeout=30) as client:
            md = client.request(__import__("kcoord.protocol.messages", fromlist=["m"]).MetadataRequest(
                topics=None, allow_auto_topic_creation=False), 12)
            tid = next(t.topic_id for t in md.topics if t.name == "jobs")
            assert acquired(fetch(client, "workers", "m1", 0, tid)) == [(0, 9, 1)]
            acks = {0: [(0, 3, [ACCEPT]), (4, 5, [RELEASE]), (6, 6, [REJECT]), (7, 9, [RELEASE])]}
            assert acquired(fetch(client, "workers", "m1", 1, tid, acks=acks)) == [(4, 5, 2), (7, 9, 2)]
            fetch(client, "workers", "m1", 2, tid, acks={0: [(4, 5, [ACCEPT]), (7, 9, [ACCEPT])]})
    finally:
        server.stop()
    out = tmp_path / "out"
    assert cli.main(["all", "--log-dirs", str(server.data_dir), "--out", str(out)], spark=spark) == 0
    rows = spark.read.parquet(str(out / "tables" / "share_deliveries")).where("group = 'workers'").collect()
    assert [(x.topic_id, x.partition, x.deliveries, x.redeliveries, x.completed, x.rejections,
             x.releases_or_lock_expiries) for x in rows] == [(str(tid), 0, 4 + 2 * 2 + 1 + 3 * 2, 5, 10, 1, 5)]
    text = (out / "report.html").read_text("utf-8")
    assert "Share groups (KIP-932)" in text and "workers" in text
