"""The join of pushed client metrics (KIP-714) with recorded rebalances, pure (analytics/client_metrics.py):
which member a push belongs to, and which push speaks of which rebalance. No Spark."""
import pyarrow as pa

from kcoord.analytics.client_metrics import (
    SCHEMA,
    Member,
    Rebalance,
    beside_rebalances,
    beside_rebalances_table,
    pushes_of,
)

LATENCY = "org.apache.kafka.consumer.coordinator.rebalance.latency.max"
A = Member("c1-aaa", "c1", "/127.0.0.1")
B = Member("c2-bbb", "c2", "/127.0.0.1")


def point(instance, t, value, *, client_id="c1", member_id=None, host="127.0.0.1", metric=LATENCY):
    return {"client_instance_id": instance, "client_id": client_id, "host": host, "member_id": member_id,
            "timestamp": t, "metric": metric, "kind": "gauge", "value": value, "attributes": {}}


def joined(rebalances, points):
    """(generation, member, instance, matched by, pushes, first, last, max) of the rebalance latency."""
    return [(r["generation"], r["consumer_id"], r["client_instance_id"], r["matched_by"], r["pushes"],
             r["first_value"], r["last_value"], r["max_value"]) for r in beside_rebalances(rebalances, pushes_of(points))]


def test_each_member_gets_its_pushes_from_the_rebalance_to_the_groups_next_record():
    gens = [Rebalance(1, 0, 10, 1_000, 2_000, (A,)), Rebalance(2, 0, 11, 2_000, None, (A, B))]
    points = [point("i1", 900, 1.0, member_id=A.consumer_id),             # before generation 1: not its
              point("i1", 1_100, 0.0, member_id=A.consumer_id),           # not yet counted by the client
              point("i1", 1_600, 13.0, member_id=A.consumer_id),
              point("i1", 1_900, 0.0, member_id=A.consumer_id),
              point("i1", 2_050, 30.0, member_id=A.consumer_id),
              point("i2", 2_300, 31.0, client_id="c2", member_id=B.consumer_id)]
    assert joined(gens, points) == [(1, "c1-aaa", "i1", "member_id", 3, 0.0, 0.0, 13.0),
                                    (2, "c1-aaa", "i1", "member_id", 1, 30.0, 30.0, 30.0),
                                    (2, "c2-bbb", "i2", "member_id", 1, 31.0, 31.0, 31.0)]
    [first] = [r for r in beside_rebalances(gens, pushes_of(points)) if r["generation"] == 1]
    assert (first["first_push_delay_ms"], first["last_push_delay_ms"]) == (100, 900)


def test_no_push_before_the_groups_next_record_means_nothing_for_that_rebalance():
    gens = [Rebalance(1, 0, 10, 1_000, 1_500, (A,)), Rebalance(2, 0, 11, 1_500, None, (A,))]
    assert joined(gens, [point("i1", 1_700, 5.0, member_id=A.consumer_id)]) == [
        (2, "c1-aaa", "i1", "member_id", 1, 5.0, 5.0, 5.0)]


def test_a_push_no_longer_naming_the_member_is_not_its_own():
    """librdkafka's terminating push, after LeaveGroup, carries group_id but no member_id."""
    gens = [Rebalance(1, 0, 10, 1_000, None, (A,))]
    points = [point("i1", 1_100, 4.0, member_id=A.consumer_id), point("i1", 1_200, 0.0)]
    assert joined(gens, points) == [(1, "c1-aaa", "i1", "member_id", 1, 4.0, 4.0, 4.0)]


def test_without_a_member_id_the_client_id_and_host_name_the_instance_when_only_one_fits():
    gens = [Rebalance(1, 0, 10, 1_000, None, (A, B))]
    points = [point("i1", 1_100, 7.0),                                      # c1 on 127.0.0.1: A
              point("i2", 1_200, 8.0, client_id="c2"), point("i3", 1_250, 9.0, client_id="c2"),  # two c2: ambiguous
              point("i4", 1_300, 1.0, host="10.0.0.9")]                    # c1 elsewhere: not A
    assert joined(gens, points) == [(1, "c1-aaa", "i1", "client_id+host", 1, 7.0, 7.0, 7.0)]


def test_a_push_naming_another_member_is_never_taken_by_client_id():
    gens = [Rebalance(1, 0, 10, 1_000, None, (A,))]
    assert joined(gens, [point("i9", 1_100, 3.0, member_id="someone-else")]) == []


def test_the_arrow_form_keeps_the_group_and_every_point_of_the_push():
    members = pa.array([[{"member_id": A.consumer_id, "client_id": "c1", "client_host": "/127.0.0.1"}]])
    rebalances = pa.table({"group": ["g"], "log_partition": [0], "log_offset": [10], "generation": [3],
                           "timestamp": [1_000], "next_timestamp": pa.array([None], pa.int64()), "members": members})
    rows = [point("i1", 1_100, 12.0, member_id=A.consumer_id),
            point("i1", 1_100, 4.0, member_id=A.consumer_id, metric="org.apache.kafka.consumer.coordinator.assigned.partitions")]
    for r in rows:
        r["attributes"] = list(r["attributes"].items())
    points = pa.Table.from_pylist(rows, schema=pa.schema([
        ("client_instance_id", pa.string()), ("client_id", pa.string()), ("host", pa.string()),
        ("member_id", pa.string()), ("timestamp", pa.int64()), ("metric", pa.string()), ("kind", pa.string()),
        ("value", pa.float64()), ("attributes", pa.map_(pa.string(), pa.string()))]))
    out = beside_rebalances_table((pa.scalar("g"),), rebalances, points)
    assert out.schema == SCHEMA
    assert sorted((r["group"], r["generation"], r["metric"], r["last_value"], r["first_push_delay_ms"])
                  for r in out.to_pylist()) == [
        ("g", 3, "org.apache.kafka.consumer.coordinator.assigned.partitions", 4.0, 100), ("g", 3, LATENCY, 12.0, 100)]
    assert beside_rebalances_table((pa.scalar("g"),), rebalances, points.slice(0, 0)).num_rows == 0
