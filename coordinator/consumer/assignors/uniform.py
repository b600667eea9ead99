"""The uniform assignor (Kafka's UniformAssignor): balanced and sticky.

When every member subscribes to the same topics (most groups): uniform_homogeneous's rule, computed
incrementally when one member joins. Otherwise (Kafka's UniformHeterogeneousAssignmentBuilder's case):
each member keeps the partitions of its current target that it still subscribes to (up to the ceiling
of partitions/members); the others go, one at a time, to the subscribed member holding the fewest (a
heap; topics with the fewest subscribers first); then partitions move from a member to a less loaded
one that also subscribes to them while that narrows a gap of two or more. It balances within what each member may take (Kafka's aim there), by a
simpler greedy method than Kafka's. Topics are numbered inside, so the loops hash small ints, not UUIDs.
"""
from __future__ import annotations

import heapq
import uuid
from operator import attrgetter

from kcoord.coordinator.consumer.assignors.uniform_homogeneous import Memory

_subscription = attrgetter("subscribed_topic_ids")


class UniformAssignor:
    name = "uniform"

    def __init__(self) -> None:
        self.memory = Memory()

    def assign(self, members: dict, topics: dict[uuid.UUID, int], current: dict) -> dict:
        if not members:
            return {}
        subscription = getattr(members, "homogeneous", None)  # a MemberSpecs may know it without looking
        if subscription is None:
            subscriptions = set(map(_subscription, members.values()))
            subscription = subscriptions.pop() if len(subscriptions) == 1 else None
        if subscription is not None:
            tids = sorted(t for t in subscription if t in topics)
            return self.memory.assign(members.keys(), tids, [topics[t] for t in tids], current,
                                      getattr(members, "joining", None), getattr(members, "current_token", None))
        return self.heterogeneous(members, topics, current)

    def heterogeneous(self, members: dict, topics: dict[uuid.UUID, int], current: dict) -> dict:
        order = sorted(members)
        tids = sorted(topics)
        index = {tid: i for i, tid in enumerate(tids)}
        sizes = [topics[tid] for tid in tids]
        numbered: dict = {}  # members with one subscription share its numbered form
        subs = {}
        for m in order:
            ids = members[m].subscribed_topic_ids
            sub = numbered.get(ids)
            if sub is None:
                sub = numbered[ids] = {index[t] for t in ids if t in index}
            subs[m] = sub
        owned: dict[str, dict[int, set[int]]] = {m: {} for m in order}
        count = dict.fromkeys(order, 0)
        taken = [bytearray(n) for n in sizes]
        total = sum(sizes[i] for i in range(len(tids)) if any(i in subs[m] for m in order))
        cap = -(-total // len(order)) if order else 0  # ceil: nobody keeps more than this
        for m in order:  # stickiness
            for tid, partitions in sorted(current.get(m, {}).items()):
                i = index.get(tid)
                if i is None or i not in subs[m]:
                    continue
                flags = taken[i]
                for p in sorted(partitions):
                    if count[m] >= cap:
                        break
                    if p < sizes[i] and not flags[p]:
                        flags[p] = 1
                        owned[m].setdefault(i, set()).add(p)
                        count[m] += 1
        subscribers = [0] * len(tids)
        for m in order:
            for i in subs[m]:
                subscribers[i] += 1
        # Topics with the fewest subscribers first: their partitions can go to fewer members, and the
        # others' then fill in around them -- far fewer moves left for _balance.
        for i in sorted(range(len(tids)), key=lambda i: (subscribers[i], i)):
            heap = [(count[m], m) for m in order if i in subs[m]]
            if not heap:
                continue
            heapq.heapify(heap)
            flags = taken[i]
            for p in range(sizes[i]):
                if not flags[p]:
                    load, best = heap[0]
                    flags[p] = 1
                    owned[best].setdefault(i, set()).add(p)
                    count[best] = load + 1
                    heapq.heapreplace(heap, (load + 1, best))
        self._balance(order, subs, owned, count)
        return {m: {tids[i]: frozenset(ps) for i, ps in owned[m].items() if ps} for m in order}

    @staticmethod
    def _balance(order: list[str], subs: dict, owned: dict, count: dict) -> None:
        """Move one partition at a time from the most loaded member that has one a less loaded member (by
        two or more) may take; each move narrows the spread, so this ends."""
        while True:
            ascending = sorted(order, key=count.__getitem__)
            lightest = count[ascending[0]] if ascending else 0
            move = None
            for src in reversed(ascending):
                if count[src] - lightest < 2:
                    break  # nobody heavier is left
                for dst in ascending:
                    if count[src] - count[dst] < 2:
                        break
                    shared = [i for i, ps in owned[src].items() if ps and i in subs[dst]]
                    if shared:
                        i = max(shared)
                        move = (src, dst, i, max(owned[src][i]))
                        break
                if move:
                    break
            if move is None:
                return
            src, dst, i, p = move
            owned[src][i].discard(p)
            owned[dst].setdefault(i, set()).add(p)
            count[src] -= 1
            count[dst] += 1
