"""Benchmark group members speaking the classic protocol for real.

A member joins (MEMBER_ID_REQUIRED round trip, then JoinGroup with its id), syncs (the leader
sends an assignment for everyone), and while its group is not yet complete heartbeats every
`hb_interval` seconds to learn of a new rebalance (REBALANCE_IN_PROGRESS -> join again), as a
real consumer does, only faster. `GroupRun` drives one group until a generation holding
`target` members has been synced by all of them, and records when that happened.
"""

from __future__ import annotations

import asyncio
import struct
import time

from bench import loadgen_wire as w
from bench.loadgen_client import KafkaConn, open_many

SESSION_MS = 300_000  # idle members must outlive the longest benchmark
REBALANCE_MS = 60_000
TOPIC = "bench-topic"
# ConsumerProtocolSubscription v0: version, topics, user data
_SUBSCRIPTION = struct.pack(">hih", 0, 1, len(TOPIC)) + TOPIC.encode() + struct.pack(">i", -1)
PROTOCOLS = [("range", _SUBSCRIPTION)]
_ASSIGNMENT = struct.pack(">hi", 0, 0) + struct.pack(">i", -1)  # version, no partitions, no user data
_REJOIN = (w.REBALANCE_IN_PROGRESS, w.ILLEGAL_GENERATION)


class MemberError(Exception):
    pass


class Member:
    __slots__ = ("conn", "group", "member_id", "generation", "synced")

    def __init__(self, conn: KafkaConn, group: str):
        self.conn, self.group = conn, group
        self.member_id, self.generation, self.synced = "", -1, False

    async def join_and_sync(self, run: GroupRun | None = None, attempts: int = 100) -> None:
        for _ in range(attempts):
            body = w.join_group(self.group, self.member_id, SESSION_MS, REBALANCE_MS, PROTOCOLS)
            j = w.parse_join_group(await self.conn.call(w.JOIN_GROUP, w.JOIN_GROUP_V, body))
            if run is not None and j["error"] != w.NONE:
                run.saw("join", j["error"])
            if j["error"] == w.MEMBER_ID_REQUIRED:
                self.member_id = j["member_id"]
                continue
            if j["error"] == w.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if j["error"] == w.COORDINATOR_LOAD_IN_PROGRESS:  # retriable, as for clients: wait for the load
                await asyncio.sleep(0.05)
                continue
            if j["error"] in _REJOIN:
                continue
            if j["error"] != w.NONE:
                raise MemberError(f"{self.group}: JoinGroup error {j['error']}")
            self.member_id, self.generation = j["member_id"], j["generation"]
            leader = j["leader"] == self.member_id
            if leader and run is not None:
                run.generation_size[self.generation] = len(j["members"])
            assignments = {m: _ASSIGNMENT for m in j["members"]} if leader else {}
            body = w.sync_group(
                self.group,
                self.generation,
                self.member_id,
                "consumer",
                j["protocol_name"] or "range",
                assignments,
            )
            err = w.parse_sync_group(await self.conn.call(w.SYNC_GROUP, w.SYNC_GROUP_V, body))
            if run is not None and err != w.NONE:
                run.saw("sync", err)
            if err == w.NONE:
                self.synced = True
                if run is not None:
                    run.on_synced(self.generation)
                return
            if err == w.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            elif err not in _REJOIN:
                raise MemberError(f"{self.group}: SyncGroup error {err}")
        raise MemberError(f"{self.group}: no stable generation after {attempts} joins")

    async def heartbeat(self) -> int:
        body = w.heartbeat(self.group, self.generation, self.member_id)
        return w.parse_heartbeat(await self.conn.call(w.HEARTBEAT, w.HEARTBEAT_V, body))

    def heartbeat_frame(self) -> bytes:
        return w.frame(
            w.HEARTBEAT, w.HEARTBEAT_V, 0, w.heartbeat(self.group, self.generation, self.member_id)
        )


class GroupRun:
    """Drive members until one generation of `target` members is synced by all of them."""

    def __init__(self, members: list[Member], target: int, hb_interval: float):
        self.members, self.target, self.hb_interval = members, target, hb_interval
        self.generation_size: dict[int, int] = {}
        self.synced: dict[int, int] = {}
        self.done = asyncio.Event()
        self.finished_at = 0.0
        self.final_generation = -1
        self.errors: dict[str, int] = {}  # "join 27" -> times a member got that answer

    def saw(self, request: str, error: int) -> None:
        key = f"{request} {error}"
        self.errors[key] = self.errors.get(key, 0) + 1

    def on_synced(self, generation: int) -> None:
        self.synced[generation] = self.synced.get(generation, 0) + 1
        if self.synced[generation] == self.target and self.generation_size.get(generation) == self.target:
            self.finished_at = time.monotonic()
            self.final_generation = generation
            self.done.set()

    async def _member(self, m: Member) -> None:
        while not self.done.is_set():
            if not m.synced:
                await m.join_and_sync(self)
                continue
            try:
                await asyncio.wait_for(self.done.wait(), self.hb_interval)
                return
            except TimeoutError:
                pass
            err = await m.heartbeat()
            if err != w.NONE:
                self.saw("heartbeat", err)
            if err in _REJOIN:
                m.synced = False
            elif err == w.UNKNOWN_MEMBER_ID:
                m.synced, m.member_id = False, ""
            elif err != w.NONE:
                raise MemberError(f"{m.group}: Heartbeat error {err}")

    async def run(self, timeout: float) -> float:
        """Returns the finish time (monotonic); raises TimeoutError if the group never completes."""
        tasks = [asyncio.ensure_future(self._member(m)) for m in self.members]
        waiter = asyncio.ensure_future(self.done.wait())
        pending, end = {waiter, *tasks}, time.monotonic() + timeout
        try:
            while not self.done.is_set():
                if time.monotonic() >= end:
                    raise TimeoutError(f"group not complete after {timeout}s: synced {self.synced}")
                finished, pending = await asyncio.wait(
                    pending, timeout=end - time.monotonic(), return_when=asyncio.FIRST_COMPLETED
                )
                for t in finished:
                    if t is not waiter and t.exception() is not None:
                        raise t.exception()
            return self.finished_at
        finally:
            for t in (waiter, *tasks):
                t.cancel()
            await asyncio.gather(waiter, *tasks, return_exceptions=True)


async def form_groups(
    port: int, groups: dict[str, int], conns: int, hb_interval: float = 0.05, timeout: float = 300
) -> list[Member]:
    """Form every group (name -> size) for real, at most `conns` joining members at a time,
    each on its own connection (a pending JoinGroup holds its connection). Connections are
    closed afterwards: Kafka members are not tied to a connection."""
    pool = await open_many(port, conns)
    free: asyncio.Queue[KafkaConn] = asyncio.Queue()
    for c in pool:
        free.put_nowait(c)
    take = asyncio.Lock()  # a group takes all its connections at once, so groups cannot deadlock
    members: list[Member] = []

    async def form(group: str, size: int) -> None:
        async with take:
            taken = [await free.get() for _ in range(size)]
        try:
            ms = [Member(c, group) for c in taken]
            await GroupRun(ms, size, hb_interval).run(timeout)
            members.extend(ms)
        finally:
            for c in taken:
                free.put_nowait(c)

    try:
        await asyncio.gather(*(form(g, n) for g, n in groups.items()))
    finally:
        for c in pool:
            c.close()
    return members
