"""Pushed client metrics (KIP-714) beside the rebalances the coordinator recorded: pure logic, no Spark.

The broker's telemetry receiver exports every accepted push as a JSON line under
`<log dir>/kcoord-client-telemetry/` (protocol/telemetry_export.py). The `client_metrics` table has one row per
data point of a push; `beside_rebalances` takes, for each rebalance and each member of the generation it
produced, that member's pushes after the rebalance completed (its GroupMetadata / group epoch record) and
before the group's next record: the client's own view of the rebalance (librdkafka's
`org.apache.kafka.consumer.coordinator.rebalance.latency.*`, `assigned.partitions`, ...) during that generation.

Which client instance is which member: librdkafka's consumer puts its `group_id` and `member_id` in the
push's resource attributes (seen with confluent-kafka 2.16 / librdkafka 2.16 against kcoord), so a push
names its member exactly ("member_id"). A push without them (another client) is matched by the member's
client.id and host ("client_id+host"), and only when exactly one instance fits: two consumers on one
host with librdkafka's default client.id `rdkafka` cannot be told apart that way, and are left out.
"""
from __future__ import annotations

import bisect
import os
from collections import defaultdict
from dataclasses import dataclass, field

import pyarrow as pa

from kcoord.analytics import layout
from kcoord.protocol.telemetry_export import EXPORT_DIR, file_seq

MEMBER_ID_ATTRIBUTES = ("member_id", "group.member.id", "group_member_id")   # librdkafka's first
GROUP_ID_ATTRIBUTES = ("group_id", "group.id")


def export_files(log_dirs) -> list[str]:
    """The export's JSON-lines files under the log dirs, oldest first per dir."""
    found = []
    for root in layout.split_log_dirs(log_dirs):
        directory = os.path.join(root, EXPORT_DIR)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            continue
        found += [os.path.join(directory, n) for n in sorted(names) if file_seq(n) is not None]
    return found


def first_of(attributes: dict | None, names: tuple[str, ...]) -> str | None:
    for name in names:
        value = (attributes or {}).get(name)
        if value:
            return value
    return None


def plain_host(host: str | None) -> str | None:
    """Kafka records a member's host as `/127.0.0.1`; the receiver sees the address alone."""
    return host.lstrip("/") if host else host


@dataclass(frozen=True)
class Member:
    consumer_id: str
    client_id: str | None
    host: str | None


@dataclass(frozen=True)
class Rebalance:
    """A rebalance of one group: its record's place and time, the group's next record's time, its members."""
    generation: int
    log_partition: int
    log_offset: int
    timestamp: int
    next_timestamp: int | None
    members: tuple[Member, ...]


@dataclass
class Push:
    client_instance_id: str
    client_id: str | None
    host: str | None
    member_id: str | None
    timestamp: int
    points: list[dict] = field(default_factory=list)   # client_metrics rows of this push


def pushes_of(points: list[dict]) -> list[Push]:
    """client_metrics rows (one per data point) back into pushes, by instance and time received."""
    by_push: dict[tuple[str, int], Push] = {}
    for row in points:
        key = (row["client_instance_id"], row["timestamp"])
        push = by_push.get(key)
        if push is None:
            push = by_push[key] = Push(row["client_instance_id"], row["client_id"], plain_host(row["host"]),
                                       row["member_id"], row["timestamp"])
        push.points.append(row)
    return sorted(by_push.values(), key=lambda p: (p.timestamp, p.client_instance_id))


def _pushes_of_member(member: Member, pushes: list[Push]) -> tuple[str, list[Push]]:
    """How the member's pushes are found, and those pushes: the ones naming it, else (none does) those of
    the one instance with its client.id and host that names no member; none when several fit."""
    named = [p for p in pushes if p.member_id == member.consumer_id]
    if named:
        return "member_id", named
    fits = [p for p in pushes if p.member_id is None and p.client_id == member.client_id
            and p.host == plain_host(member.host)]
    return "client_id+host", fits if len({p.client_instance_id for p in fits}) == 1 else []


def beside_rebalances(rebalances: list[Rebalance], pushes: list[Push]) -> list[dict]:
    """One row per (rebalance, member, pushed metric and attributes) over the member's pushes in
    [rebalance record, group's next record): the value in the first and the last of them and the largest.

    Why not just the first push after the record: a client's metrics trail the record -- librdkafka counts a
    rebalance done when the application's poll has applied the assignment, so its next push may still show
    the previous state. Over the generation's pushes, `max` of a windowed metric (rebalance.latency.max)
    catches the rebalance wherever it landed, and `last` is the state the member settled in
    (assigned.partitions)."""
    out = []
    pushes = sorted(pushes, key=lambda p: (p.timestamp, p.client_instance_id))
    times = [p.timestamp for p in pushes]
    for r in rebalances:
        end = len(pushes) if r.next_timestamp is None else bisect.bisect_left(times, r.next_timestamp)
        window = pushes[bisect.bisect_left(times, r.timestamp):end]
        for member in r.members:
            matched_by, mine = _pushes_of_member(member, window)
            series: dict[tuple[str, tuple], list[tuple[Push, dict]]] = {}
            for push in mine:
                for point in push.points:
                    key = (point["metric"], tuple(sorted(point["attributes"].items())))
                    series.setdefault(key, []).append((push, point))
            for (metric, attributes), seen in series.items():
                (first_push, first), (last_push, last) = seen[0], seen[-1]
                out.append({"generation": r.generation, "log_partition": r.log_partition, "log_offset": r.log_offset,
                            "rebalance_timestamp": r.timestamp, "consumer_id": member.consumer_id,
                            "client_id": member.client_id, "client_instance_id": first_push.client_instance_id,
                            "matched_by": matched_by, "pushes": len(seen),
                            "first_push_delay_ms": first_push.timestamp - r.timestamp,
                            "last_push_delay_ms": last_push.timestamp - r.timestamp,
                            "metric": metric, "kind": first["kind"], "attributes": dict(attributes),
                            "first_value": first["value"], "last_value": last["value"],
                            "max_value": max(point["value"] for _, point in seen)})
    return out


# --- the Spark side's Arrow schemas and the per-group function for cogroup().applyInArrow ----------------------
ATTRIBUTES = pa.map_(pa.string(), pa.string())
POINT_COLUMNS = ("client_instance_id", "client_id", "host", "member_id", "timestamp", "metric", "kind", "value",
                 "attributes")
SCHEMA = pa.schema([("group", pa.string()), ("generation", pa.int32()), ("log_partition", pa.int32()),
                    ("log_offset", pa.int64()), ("rebalance_timestamp", pa.int64()), ("consumer_id", pa.string()),
                    ("client_id", pa.string()), ("client_instance_id", pa.string()), ("matched_by", pa.string()),
                    ("pushes", pa.int32()), ("first_push_delay_ms", pa.int64()), ("last_push_delay_ms", pa.int64()),
                    ("metric", pa.string()), ("kind", pa.string()), ("attributes", ATTRIBUTES),
                    ("first_value", pa.float64()), ("last_value", pa.float64()), ("max_value", pa.float64())])


def _rebalance(row: dict) -> Rebalance:
    members = tuple(Member(m["member_id"], m["client_id"], m["client_host"]) for m in row["members"] or ())
    return Rebalance(row["generation"], row["log_partition"], row["log_offset"], row["timestamp"],
                     row["next_timestamp"], members)


def beside_rebalances_table(key: tuple, rebalances: pa.Table, points: pa.Table) -> pa.Table:
    """cogroup(...).applyInArrow over one group (`key`): its rebalances (with members and next_timestamp)
    and the client_metrics rows of the instances that may be its members."""
    if not rebalances.num_rows or not points.num_rows:
        return SCHEMA.empty_table()
    group = key[0].as_py()
    point_rows = points.select(list(POINT_COLUMNS)).to_pylist()
    for row in point_rows:   # map columns come back from Arrow as lists of pairs
        attrs = row["attributes"]
        row["attributes"] = dict(attrs) if attrs is not None else {}
    rows = beside_rebalances([_rebalance(r) for r in rebalances.to_pylist()], pushes_of(point_rows))
    columns: dict[str, list] = defaultdict(list)
    for row in rows:
        row["group"] = group
        row["attributes"] = list(row["attributes"].items())
        for name in SCHEMA.names:
            columns[name].append(row[name])
    return pa.table({name: columns[name] for name in SCHEMA.names}, schema=SCHEMA)
