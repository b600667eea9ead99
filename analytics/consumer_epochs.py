"""A consumer (KIP-848) group's records replayed into generations: one row per group epoch.

The coordinator writes, for an epoch bump, the changed member subscriptions (type 5) and topic metadata
(type 4) first, then the group epoch (type 3), then the target assignment of the members (type 7)
closed by the assignment epoch (type 6); members then reconcile, each one's progress is a current
assignment record (type 8). Replaying them in log order gives, for every epoch:
  - the members at the epoch (those subscribed when the epoch record was written), their subscriptions;
  - their target assignment, once the assignment epoch reaches the group epoch (null if it never did
    before the next bump);
  - what each member owned when the epoch ended (current assignment, member epoch, pending revocation),
    and when every member first held exactly its target at the epoch (reconciled_timestamp);
  - the cause the records show, comparing the epoch with the previous one (inferred_cause):
      migration             the group's first epoch already has classic-protocol members (a classic
                            group converted to a consumer group);
      member_joined         a member id that was not in the previous epoch;
      member_removed        a member id of the previous epoch is gone. The records of a member that left
                            (epoch -1), was fenced or whose session expired are the same tombstones, so
                            they cannot be told apart here; kcoord's kcoord.rebalance.cause header can;
      subscription_changed  a kept member's topic names or regex changed;
      regex_resolved        a regular expression record (type 16) resolved to other topics;
      metadata_changed      the subscribed topics' metadata changed (type 4, or Kafka 4.1's metadata hash);
      unknown               none of the above shows in the records, or the log holds no earlier epoch
                            of the group (compaction keeps only the latest record of each key).
Pure Python over dicts (consumer_records.SCHEMA fields); `replay_table` is the Arrow form Spark calls.
"""
from collections import Counter

import pyarrow as pa

from kcoord.analytics import consumer_records as cr
from kcoord.analytics.segment import MEMBER

SCHEMA = pa.schema([
    ("group", pa.string()), ("generation", pa.int32()), ("protocol_type", pa.string()), ("protocol", pa.string()),
    ("leader", pa.string()), ("state_timestamp", pa.int64()), ("tombstone", pa.bool_()), ("timestamp", pa.int64()),
    ("log_partition", pa.int32()), ("log_offset", pa.int64()), ("members", pa.list_(MEMBER)),
    ("cause", pa.string()), ("reason", pa.string()), ("trigger_member", pa.string()),
    ("inferred_cause", pa.string()), ("cause_detail", pa.string()),
    ("assignment_epoch", pa.int32()),          # the target's epoch, when it reached this group epoch
    ("reconciled_timestamp", pa.int64()),      # first time every member held exactly its target
])
HEADER = "kcoord.rebalance."


def _subscription(m: dict) -> tuple:
    return (tuple(m["subscribed_topic_names"] or ()), m["subscribed_topic_regex"])


def infer_cause(prev: dict | None, now: dict, regexes_changed: list, metadata_changed: bool,
                epoch: int = 1) -> tuple[str, str]:
    """(cause, detail) of an epoch bump; prev/now map member id -> member metadata (prev None: the first
    epoch in the log, which is the group's first only at epoch 1: compaction drops older epochs)."""
    if prev is None and epoch != 1 and not any(m["classic_session_timeout_ms"] is not None for m in now.values()):
        return "unknown", "no earlier epoch in the log (compacted away)"
    before = prev or {}
    joined = sorted(set(now) - set(before))
    removed = sorted(set(before) - set(now))
    changed = sorted(m for m in set(now) & set(before) if _subscription(now[m]) != _subscription(before[m]))
    detail = "; ".join(f"{what}: {', '.join(ids)}" for what, ids in (
        ("joined", joined), ("removed", removed), ("subscription changed", changed),
        ("regex resolved", regexes_changed)) if ids)
    if metadata_changed:
        detail = "; ".join(x for x in (detail, "topic metadata changed") if x)
    if prev is None and any(m["classic_session_timeout_ms"] is not None for m in now.values()):
        return "migration", detail
    for cause, hit in (("member_joined", joined), ("member_removed", removed), ("subscription_changed", changed),
                       ("regex_resolved", regexes_changed), ("metadata_changed", metadata_changed)):
        if hit:
            return cause, detail
    return "unknown", detail


class _Group:
    """The replay state of one group."""

    def __init__(self, group: str):
        self.group = group
        self.members: dict = {}            # member id -> member metadata record
        self.topic_names: dict = {}        # topic id -> name (every name ever seen: names outlive topics)
        self.topics: dict = {}             # the current partition metadata
        self.metadata_hash = None
        self.regexes: dict = {}
        self.target: dict = {}             # member id -> [(topic id, partition)]
        self.current: dict = {}            # member id -> current assignment record
        self.prev_members: dict | None = None
        self.regexes_changed: list = []
        self.metadata_changed = False
        self.open: dict | None = None      # the epoch being built
        self.rows: list = []

    def name(self, tps) -> list:
        return sorted((self.topic_names.get(t, t), p) for t, p in tps or ())

    def apply(self, r: dict) -> None:
        t, mid = r["record_type"], r["member_id"]
        if t == cr.MEMBER_METADATA:
            self._set(self.members, mid, r)
        elif t == cr.PARTITION_METADATA:
            topics = {} if r["tombstone"] else {tid: (name, n) for tid, name, n in r["topics"] or ()}
            self.topic_names.update((tid, name) for tid, (name, _n) in topics.items())
            self.metadata_changed |= bool(self.topics) and bool(topics) and topics != self.topics
            self.topics = topics
        elif t == cr.REGULAR_EXPRESSION:
            before = self.regexes.get(r["regex"])
            self._set(self.regexes, r["regex"], None if r["tombstone"] else r["regex_topics"])
            if not r["tombstone"] and before != r["regex_topics"]:
                self.regexes_changed.append(r["regex"])
        elif t == cr.TARGET_MEMBER:
            self._set(self.target, mid, None if r["tombstone"] else r["partitions"])
        elif t == cr.CURRENT_ASSIGNMENT:
            self._set(self.current, mid, r)
            if self.open is not None and not r["tombstone"] and mid in self.open["member_meta"]:
                self.open["current"][mid] = r    # kept past the member's tombstones: what it held at the end
            self._check_reconciled(r["timestamp"])
        elif t == cr.TARGET_EPOCH:
            if self.open is not None and not r["tombstone"] and r["epoch"] == self.open["generation"]:
                self.open["assignment_epoch"] = r["epoch"]
                self.open["target"] = {m: list(self.target.get(m) or ()) for m in self.open["member_meta"]}
                self._check_reconciled(r["timestamp"])
        elif t == cr.GROUP_EPOCH:
            self._epoch(r)

    @staticmethod
    def _set(d: dict, k, r) -> None:
        if r is None or (isinstance(r, dict) and r["tombstone"]):
            d.pop(k, None)
        else:
            d[k] = r

    def _epoch(self, r: dict) -> None:
        if r["tombstone"]:
            self.close()
            self.rows.append(dict(dict.fromkeys(SCHEMA.names), group=self.group, protocol_type="consumer",
                                  tombstone=True, timestamp=r["timestamp"], log_partition=r["log_partition"],
                                  log_offset=r["log_offset"]))
            self._reset()
            return
        if self.open is not None and self.open["generation"] == r["epoch"]:
            return                         # the same epoch written again: nothing new
        hash_changed = (r["metadata_hash"] is not None and self.metadata_hash is not None
                        and r["metadata_hash"] != self.metadata_hash)
        if r["metadata_hash"] is not None:
            self.metadata_hash = r["metadata_hash"]
        self.close()
        now = dict(self.members)
        cause, detail = infer_cause(self.prev_members, now, self.regexes_changed,
                                    self.metadata_changed or hash_changed, r["epoch"])
        headers = r["headers"] or {}
        assignors = Counter(m["server_assignor"] for m in now.values() if m["server_assignor"])
        self.open = dict(
            group=self.group, generation=r["epoch"], protocol_type="consumer",
            protocol=assignors.most_common(1)[0][0] if assignors else None, leader=None, state_timestamp=None,
            tombstone=False, timestamp=r["timestamp"], log_partition=r["log_partition"], log_offset=r["log_offset"],
            cause=headers.get(HEADER + "cause"), reason=headers.get(HEADER + "reason"),
            trigger_member=headers.get(HEADER + "trigger_member"), inferred_cause=cause, cause_detail=detail,
            assignment_epoch=None, reconciled_timestamp=None, member_meta=now, target=None,
            current={mid: c for mid, c in self.current.items() if mid in now})
        self.prev_members = now
        self.regexes_changed, self.metadata_changed = [], False

    def _reset(self) -> None:
        """After the group's tombstone: a group of that name later is a new group."""
        rows = self.rows
        self.__init__(self.group)
        self.rows = rows

    def _check_reconciled(self, ts: int) -> None:
        g = self.open
        if g is None or g["target"] is None or g["reconciled_timestamp"] is not None:
            return
        for mid, target in g["target"].items():
            c = self.current.get(mid)
            if c is None or c["epoch"] != g["generation"] or c["pending_revocation"] or \
                    sorted(c["partitions"] or ()) != sorted(target):
                return
        g["reconciled_timestamp"] = ts

    def close(self) -> None:
        g, self.open = self.open, None
        if g is None:
            return
        meta, target, current = g.pop("member_meta"), g.pop("target"), g.pop("current")
        members = []
        for mid, m in sorted(meta.items()):
            c = current.get(mid) or {}
            members.append({
                "member_id": mid, "group_instance_id": m["instance_id"], "client_id": m["client_id"],
                "client_host": m["client_host"], "rebalance_timeout_ms": m["rebalance_timeout_ms"],
                "session_timeout_ms": m["classic_session_timeout_ms"],
                "subscribed_topics": list(m["subscribed_topic_names"] or ()),
                "assignment": None if target is None else self.name(target.get(mid)),
                "subscribed_topic_regex": m["subscribed_topic_regex"], "server_assignor": m["server_assignor"],
                "member_epoch": c.get("epoch"), "current_assignment": self.name(c.get("partitions")) if c else None,
                "pending_revocation": self.name(c.get("pending_revocation")) if c else None})
        g["members"] = members
        self.rows.append(g)


def replay(records: list[dict]) -> list[dict]:
    """Generation rows (SCHEMA fields) of one group's records, given in log order."""
    if not records:
        return []
    state = _Group(records[0]["group"])
    for r in records:
        state.apply(r)
    state.close()
    return state.rows


def replay_table(table: pa.Table) -> pa.Table:
    """Spark's applyInArrow function: one group's consumer_records rows -> its generations."""
    rows = table.sort_by([("log_partition", "ascending"), ("log_offset", "ascending")]).to_pylist()
    for r in rows:   # as the decoder gives them: a map as a dict, structs as tuples
        h = r["headers"]
        r["headers"] = dict(h) if isinstance(h, list) else h
        for f in ("topics", "partitions", "pending_revocation"):
            if r[f] is not None:
                r[f] = [tuple(x.values()) for x in r[f]]
    out = replay(rows)
    return pa.Table.from_pylist(out, schema=SCHEMA) if out else SCHEMA.empty_table()
