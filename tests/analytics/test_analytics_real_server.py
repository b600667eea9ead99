"""The pipeline over a store written by the REAL kcoord server: kafka-python consumers join, leave, get
killed and commit while a producer writes to the consumed topic; the tables must tell that story."""
import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pyarrow.parquet as pq
import pytest

from kcoord.analytics import cli, pipeline
from kcoord.testkit.broker_process import BrokerProcess
from kcoord.testkit.pytest_plugin import session_launcher

pytestmark = [pytest.mark.spark, pytest.mark.slow]

HERE = os.path.dirname(os.path.abspath(__file__))
GROUP, TOPIC, PARTITIONS = "rt-group", "orders", 3
EXPECTED = [  # (client ids in the generation, cause the coordinator must have recorded)
    ({"c1"}, "initial_join"), ({"c1", "c2"}, "member_joined"), ({"c1"}, "member_left"),
    ({"c1", "c3"}, "member_joined"), ({"c1"}, "session_timeout"), (set(), "member_left")]

SAME_MEMBERS = {"leader_rejoined", "metadata_changed"}


class Consumer:
    """rt_consumer.py in its own process; its JSON events collected in order."""

    def __init__(self, bootstrap, client_id, workdir):
        self.client_id, self.events, self._q = client_id, [], queue.Queue()
        with open(os.path.join(workdir, f"{client_id}.stderr"), "w") as err:  # kept for post-mortems
            self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "rt_consumer.py"), bootstrap, GROUP,
                                          client_id, TOPIC], stdout=subprocess.PIPE, stderr=err,
                                         text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(os.getcwd(), "src"), os.getcwd()])))
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self._q.put(json.loads(line))

    def wait(self, pred, after=0, timeout=60):
        """Index of the first event at or after `after` satisfying pred."""
        deadline = time.monotonic() + timeout
        i = after
        while True:
            while i < len(self.events):
                if pred(self.events[i]):
                    return i
                i += 1
            try:
                self.events.append(self._q.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"{self.client_id}: no matching event; saw {self.events[-5:]}") from None

    def assigned(self, n, after=0):
        return self.wait(lambda e: "assigned" in e and len(e["assigned"]) == n, after)

    def assigned_some(self, after=0):
        return self.wait(lambda e: "assigned" in e and 0 < len(e["assigned"]) < PARTITIONS, after)

    def committed_after(self, i):
        return self.wait(lambda e: "commit" in e, i)

    def drain(self, timeout=5):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        time.sleep(0.2)
        while not self._q.empty():
            self.events.append(self._q.get())

    def commits(self):
        return [tuple(c) for e in self.events if "commit" in e for c in e["commit"]]


class Producer(threading.Thread):
    """Sends a few records to every partition every 200 ms with an explicit timestamp, flushing each
    round (so no batch mixes rounds), and keeps every record's (partition, offset, timestamp)."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
        self.sent, self.stop_flag, self.rounds = [], threading.Event(), 0

    def run(self):
        while not self.stop_flag.is_set():
            ts = int(time.time() * 1000)
            futures = [self.producer.send(TOPIC, b"x" * 20, partition=p, timestamp_ms=ts)
                       for p in range(PARTITIONS) for _ in range(4)]
            self.producer.flush()
            self.sent += [(f.get().partition, f.get().offset, ts) for f in futures]
            self.rounds += 1
            time.sleep(0.2)

    def finish(self):
        self.stop_flag.set()
        self.join(30)
        self.producer.close()


@pytest.fixture(scope="module")
def history(tmp_path_factory, spark):
    work = tmp_path_factory.mktemp("real-server")
    overrides = {"num.partitions": str(PARTITIONS), "offsets.topic.num.partitions": "4"}
    consumers = []
    with BrokerProcess(work, overrides, launcher=session_launcher()) as server:
        producer = Producer(server.bootstrap)
        producer.start()
        deadline = time.monotonic() + 30
        while producer.rounds < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            c1 = Consumer(server.bootstrap, "c1", work)
            consumers.append(c1)
            i = c1.committed_after(c1.assigned(PARTITIONS))
            c2 = Consumer(server.bootstrap, "c2", work)                 # joins: c1 gives up partitions
            consumers.append(c2)
            c2.committed_after(c2.assigned_some())
            i = c1.committed_after(c1.assigned_some(i))
            c2.proc.send_signal(signal.SIGTERM)                   # leaves cleanly (LeaveGroup)
            c2.drain(30)
            i = c1.committed_after(c1.assigned(PARTITIONS, i))
            c3 = Consumer(server.bootstrap, "c3", work)
            consumers.append(c3)
            c3.committed_after(c3.assigned_some())
            i = c1.committed_after(c1.assigned_some(i))
            c3.proc.kill()                                        # crashes: expired by session timeout
            c3.drain()
            i = c1.committed_after(c1.assigned(PARTITIONS, i))
            c1.committed_after(i + 1)
        finally:
            producer.finish()
            for c in consumers:
                if c.proc.poll() is None:
                    c.proc.send_signal(signal.SIGTERM)
                c.drain(30)
    out = work / "out"
    assert cli.main(["all", "--log-dirs", str(server.data_dir), "--out", str(out)], spark=spark) == 0
    return consumers, producer.sent, str(out)


def rows(out, name):
    return [r for r in pq.read_table(pipeline.table_dir(out, name)).to_pylist() if r["group"] == GROUP]


def test_every_commit_the_consumers_saw_succeed_is_in_the_table(history):
    consumers, _, out = history
    stored = collections.Counter((r["topic"], r["partition"], r["current_offset"])
                                 for r in rows(out, "offset_commits"))
    acknowledged = collections.Counter(c for x in consumers for c in x.commits())
    assert not acknowledged - stored
    # Only the killed consumer may have had a commit stored whose acknowledgement it never printed.
    assert sum((stored - acknowledged).values()) <= PARTITIONS


def test_generations_members_and_causes_tell_what_the_test_did(history):
    _, _, out = history
    members = collections.defaultdict(set)
    for r in rows(out, "generation_members"):
        members[r["generation"]].add(r["client_id"])
    rebalances = sorted(rows(out, "rebalances"), key=lambda r: (r["log_partition"], r["log_offset"]))
    got = [(members[r["generation"]], r["cause"]) for r in rebalances]
    # A client may rejoin without a membership change (kafka-python's leader does so when it sees new
    # topic metadata): such generations keep the member set and must say so in their cause.
    changes = [got[0]] + [now for before, now in zip(got, got[1:], strict=False) if now[0] != before[0]]
    assert changes == EXPECTED, got
    assert all(now[1] in SAME_MEMBERS for before, now in zip(got, got[1:], strict=False) if now[0] == before[0])
    assert all(r["cause_source"] == "header" for r in rebalances)
    assert [r["generation"] for r in rebalances] == sorted({r["generation"] for r in rebalances})
    assert rebalances[-1]["is_empty"]


def test_lag_equals_produced_log_end_as_of_each_commit_minus_the_commit(history):
    _, sent, out = history
    got = rows(out, "lag")
    assert got
    for r in got:
        ends = [off + 1 for p, off, ts in sent if p == r["partition"] and ts <= r["timestamp"]]
        want = max(max(ends) - r["current_offset"], 0) if ends else None
        assert (r["log_end_offset"], r["lag"]) == ((max(ends) if ends else None), want), r
    assert any(r["lag"] for r in got)


def test_health_covers_every_partition_of_the_group(history):
    _, _, out = history
    assert sorted(r["partition"] for r in rows(out, "health")) == list(range(PARTITIONS))
    assert len(rows(out, "health_groups")) == 1
