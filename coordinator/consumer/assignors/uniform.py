"""The uniform assignor (Kafka's UniformAssignor): balanced and sticky.

Each member keeps the partitions of its current target that it still subscribes to; the others go,
one at a time, to the subscribed member holding the fewest; then partitions move from a member to a
less loaded one that also subscribes to them while that narrows a gap of two or more. With identical
subscriptions every member ends with floor or ceil of partitions/members (Kafka's
OptimizedUniformAssignmentBuilder); with different subscriptions it balances within what each member
may take (UniformHeterogeneousAssignmentBuilder's aim), by a simpler greedy method than Kafka's.
"""
from __future__ import annotations

import heapq
import uuid


class UniformAssignor:
    name = "uniform"

    def assign(self, members: dict, topics: dict[uuid.UUID, int], current: dict) -> dict:
        order = sorted(members)
        owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in order}
        taken: set[tuple[uuid.UUID, int]] = set()
        total = sum(n for tid, n in topics.items() if any(tid in members[m].subscribed_topic_ids for m in order))
        cap = -(-total // len(order)) if order else 0  # ceil: nobody keeps more than this
        for m in order:  # stickiness
            subs = members[m].subscribed_topic_ids
            for tid, partitions in sorted(current.get(m, {}).items()):
                if tid not in subs or tid not in topics:
                    continue
                for p in sorted(partitions):
                    if p < topics[tid] and (tid, p) not in taken and len(owned[m]) < cap:
                        owned[m].add((tid, p))
                        taken.add((tid, p))
        for tid in sorted(topics):
            # the least loaded subscriber first (ties: member id): a heap, O(log members) a partition
            heap = [(len(owned[m]), m) for m in order if tid in members[m].subscribed_topic_ids]
            if not heap:
                continue
            heapq.heapify(heap)
            for p in range(topics[tid]):
                if (tid, p) not in taken:
                    load, best = heap[0]
                    owned[best].add((tid, p))
                    taken.add((tid, p))
                    heapq.heapreplace(heap, (load + 1, best))
        self._balance(order, members, owned)
        out = {}
        for m in order:
            a: dict[uuid.UUID, set[int]] = {}
            for tid, p in owned[m]:
                a.setdefault(tid, set()).add(p)
            out[m] = {tid: frozenset(ps) for tid, ps in a.items()}
        return out

    @staticmethod
    def _balance(order: list[str], members: dict, owned: dict[str, set]) -> None:
        """Move one partition at a time from the most loaded member that has one a less loaded member (by
        two or more) may take; each move narrows the spread, so this ends."""
        while True:
            ascending = sorted(order, key=lambda m: len(owned[m]))
            lightest = len(owned[ascending[0]]) if ascending else 0
            move = None
            for src in reversed(ascending):
                if len(owned[src]) - lightest < 2:
                    break  # nobody heavier is left
                for dst in ascending:
                    if len(owned[src]) - len(owned[dst]) < 2:
                        break
                    subs = members[dst].subscribed_topic_ids
                    movable = [tp for tp in owned[src] if tp[0] in subs]
                    if movable:
                        move = (src, dst, max(movable))
                        break
                if move:
                    break
            if move is None:
                return
            src, dst, tp = move
            owned[src].discard(tp)
            owned[dst].add(tp)
