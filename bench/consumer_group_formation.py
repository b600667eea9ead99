"""KIP-848 group formation over TCP: N consumer-protocol members (one connection each) from nothing to
every member holding its target assignment at the group epoch (ConsumerGroupDescribe: Stable).

Each member sends ConsumerGroupHeartbeat epoch 0, then heartbeats every `hb` seconds; it takes each
assignment it is given at once and acknowledges it with an immediate heartbeat reporting what it now
owns (what the Java client and librdkafka do after reconciling), and otherwise leaves its owned partitions
out (they are sent only when changed). Baseline, same
run and server: N classic members forming one group (JoinGroup, SyncGroup, heartbeats every `hb`
seconds) -- bench/loadgen_members.form_groups.
"""
from __future__ import annotations

import asyncio
import time

from bench import loadgen_wire as w
from bench.loadgen_client import open_many
from bench.loadgen_members import form_groups
from bench.loadgen_server import KcoordServer
from bench.runner import (
    arun,
    interleaved,
    main,
    median,
    proc_cpu_seconds,
    raise_nofile,
    ratio,
    settings,
    wait_idle,
)
from kcoord.protocol import messages as m

HEARTBEAT, DESCRIBE = 68, 69
TOPIC, PARTITIONS = "formation", 1000
HB_S = 0.05
TARGET_S = 1.0  # the target at 1,000 members

_req = m.codec("ConsumerGroupHeartbeatRequest", 1)
_resp = m.codec("ConsumerGroupHeartbeatResponse", 1)
_R = m.ConsumerGroupHeartbeatRequest


def _heartbeat(group: str, member_id: str, epoch: int, owned: dict | None) -> bytes:
    """`owned` None: unchanged since the member last sent it (not sent, as the Java client's HeartbeatState
    and librdkafka leave it out)."""
    join = epoch == 0
    return _req.encode(_R(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
        rebalance_timeout_ms=60_000 if join else -1, subscribed_topic_names=[TOPIC] if join else None,
        subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=None if owned is None else [_R.TopicPartitions(topic_id=t, partitions=sorted(p))
                                                     for t, p in owned.items()]))


async def _stable(conn, group: str, members: int) -> bool:
    payload = await conn.call(DESCRIBE, 0, m.codec("ConsumerGroupDescribeRequest", 0).encode(
        m.ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)))
    (g,) = m.codec("ConsumerGroupDescribeResponse", 0).decode(payload, 5)[0].groups
    return g.group_state == "Stable" and len(g.members) == members


async def consumer_formation(port: int, n: int, group: str, formed: list | None = None,
                             partitions: int | None = None) -> float:
    """Seconds until the group is Stable; `formed`, if given, then gets each member's (id, epoch).
    `partitions`: the subscribed topic's partition count, if known (then describe only once the members
    hold them all)."""
    conns = await open_many(port, n + 1)
    done = asyncio.Event()
    epochs = [0] * n  # each member's epoch as its last answer gave it
    ids = [""] * n
    holding = [0] * n  # how many partitions each member holds as its last assignment gave them

    async def member(conn, k: int) -> None:
        member_id, epoch, owned, sent = "", 0, {}, None
        plain = (None, b"")  # ((member id, epoch), its heartbeat without owned partitions): sent most often
        while not done.is_set():
            report = owned if owned != sent else None
            if report is None and epoch and plain[0] == (member_id, epoch):
                body = plain[1]
            else:
                body = _heartbeat(group, member_id, epoch, report)
                if report is None and epoch:
                    plain = ((member_id, epoch), body)
            r = _resp.decode(await conn.call(HEARTBEAT, 1, body), 5)[0]
            if r.error_code == w.COORDINATOR_LOAD_IN_PROGRESS:  # retriable, as for clients: the shard still loads
                await asyncio.sleep(HB_S)
                continue
            if r.error_code:
                raise RuntimeError(f"ConsumerGroupHeartbeat error {r.error_code}: {r.error_message}")
            sent = owned if report is not None else sent
            member_id, epoch = r.member_id, r.member_epoch
            epochs[k], ids[k] = epoch, member_id
            if r.assignment is not None:
                new = {tp.topic_id: tp.partitions for tp in r.assignment.topic_partitions}
                holding[k] = sum(len(p) for p in new.values())
                if new != owned:  # reconciled at once: acknowledge it now, as the Java client and librdkafka do
                    owned = new
                    continue
            await asyncio.sleep(HB_S)  # (then the loop sees `done`: a member stops at most HB_S after it)

    t0 = time.monotonic()
    tasks = [asyncio.ensure_future(member(c, k)) for k, c in enumerate(conns[:n])]
    try:
        # Describing 1,000 members costs the server milliseconds: ask only once every member has an epoch,
        # they all have the same one and together they hold every partition (necessary for Stable, not
        # sufficient: the answer decides).
        while (min(epochs) == 0 or min(epochs) != max(epochs)
               or (partitions is not None and sum(holding) != partitions)
               or not await _stable(conns[n], group, n)):
            for t in tasks:
                if t.done() and t.exception() is not None:
                    raise t.exception()
            await asyncio.sleep(0.01)
        elapsed = time.monotonic() - t0
        if formed is not None:
            formed += zip(ids, epochs, strict=True)
        return elapsed
    finally:
        done.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in conns:
            c.close()


async def _create_topic(port: int, partitions: int = PARTITIONS) -> None:
    (conn,) = await open_many(port, 1)
    try:
        await conn.call(w.CREATE_TOPICS, w.CREATE_TOPICS_V, w.create_topic(TOPIC, partitions))
    finally:
        conn.close()


# Formed groups stay idle while the other reps run: their sessions must outlive the run.
_OVERRIDES = {"group.consumer.session.timeout.ms": "600000", "group.consumer.max.session.timeout.ms": "600000"}


def measure(n: int, reps: int) -> dict:
    """Consumer-protocol and classic formations of n members, alternating rep by rep (a fresh group each),
    on one server: wall seconds and the server's CPU seconds, medians, and the per-rep ratios' median."""
    with KcoordServer(_OVERRIDES) as server:
        arun(server.wait_ready())
        arun(_create_topic(server.port))
        count = iter(range(10**6))

        def timed(form) -> tuple[float, float]:
            wait_idle(server.pid)
            c0, t0 = proc_cpu_seconds(server.pid), time.monotonic()
            form(next(count))
            return time.monotonic() - t0, proc_cpu_seconds(server.pid) - c0

        out = interleaved({
            "consumer": lambda: timed(lambda i: arun(consumer_formation(server.port, n, f"kip848-{n}-{i}",
                                                                        partitions=PARTITIONS))),
            "classic": lambda: timed(lambda i: arun(form_groups(server.port, {f"classic-{n}-{i}": n}, conns=n,
                                                                hb_interval=HB_S))),
        }, reps)
    (cw, cc), (kw, kc) = ([median(x[j] for x in out[k]) for j in (0, 1)] for k in ("consumer", "classic"))
    row = {"members": n, "consumer protocol s": round(cw, 3), "classic s (baseline)": round(kw, 3),
           "ratio": round(median(ratio(a[0], b[0]) for a, b in zip(out["consumer"], out["classic"], strict=True)), 2),
           "consumer server cpu s": round(cc, 3), "classic server cpu s": round(kc, 3),
           "cpu ratio": round(median(ratio(a[1], b[1]) for a, b in zip(out["consumer"], out["classic"],
                                                                       strict=True)), 2),
           "consumer s per rep": " ".join(f"{x[0]:.2f}" for x in out["consumer"])}
    if n == 1000:
        row.update({"target": f"<= {TARGET_S} s", "met": "yes" if cw <= TARGET_S else "NO"})
    return row


def run(quick: bool = False) -> dict:
    raise_nofile()
    plan = [(100, 2)] if quick else [(100, 5), (1000, 3)]
    return {"name": "consumer_group_formation",
            "settings": settings(partitions=PARTITIONS, heartbeat_s=HB_S, assignor="uniform"),
            "rows": [measure(n, reps) for n, reps in plan]}


if __name__ == "__main__":
    main(run)
