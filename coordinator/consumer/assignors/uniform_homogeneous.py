"""The uniform assignor when every member subscribes to the same topics (Kafka's
UniformHomogeneousAssignmentBuilder), and its incremental form for the step a group takes most often:
one member more.

The rule. Partitions are ordered by (topic id, partition); q, r = divmod(partitions, members). Members,
in id order, keep the lowest of their current partitions: q of them, or q + 1 for the first r members
that hold more than q. What is left goes, one partition at a time in that order, to the member holding
the fewest (ties: the lowest id). Every member ends with q or q + 1 and loses only what the balance
requires. (Kafka hands its r extra slots to the first r members of its map, whatever they hold; giving
them to members that already hold one more moves fewer partitions.)

The incremental form. The assignor remembers the last groups it computed: the result and a summary of
it (members in id order, each one's count, who holds q + 1). When a call's `current` is a remembered
result and its members are that result's plus one newcomer, the rule's outcome follows from the summary:
only the members above their new quota are visited. A join so costs O(partitions moved + members) in C
(dict copies and compares) instead of O(members + partitions) in Python, and gives exactly what the full
rule gives (tests/coordinator/consumer/test_uniform_assignor.py checks both against each other).
"""
from __future__ import annotations

import bisect
import heapq
import uuid
from collections import OrderedDict

MEMORY = 16  # groups remembered: the ones heartbeating now


class Summary:
    """What the incremental step needs of a result: `heavy` are the members holding q + 1, in id order.
    `token`: a new object at each step, handed out with its result (the caller may write it with the
    result's records, and give it back as the token of its current target)."""

    __slots__ = ("key", "order", "counts", "heavy", "q", "result", "token")

    def __init__(self, key: tuple, order: list[str], counts: dict[str, int], heavy: list[str], q: int,
                 result: dict) -> None:
        self.key, self.order, self.counts, self.heavy, self.q, self.result = key, order, counts, heavy, q, result
        self.token = object()


def _assignment(tids: list[uuid.UUID], pairs) -> dict:
    out: dict[int, list[int]] = {}
    for i, p in pairs:
        out.setdefault(i, []).append(p)
    return {tids[i]: frozenset(ps) for i, ps in out.items()}


def _shed(index: dict, assignment: dict, count: int) -> tuple[dict, list[tuple[int, int]]]:
    """(what the member keeps, the `count` partitions it gives up: its highest), touching only the topics
    it gives up partitions of."""
    kept = dict(assignment)
    freed: list[tuple[int, int]] = []
    for t in sorted(assignment, key=index.__getitem__, reverse=True):
        ps, i = assignment[t], index[t]
        if count < len(ps):  # its highest `count` (most often one): picked without sorting them all
            gone = heapq.nlargest(count, ps) if count > 1 else [max(ps)]
            gone.reverse()
            freed += [(i, p) for p in gone]
            kept[t] = ps.difference(gone)
            break
        freed += [(i, p) for p in sorted(ps)]
        count -= len(ps)
        del kept[t]
        if not count:
            break
    return kept, freed


def full(order: list[str], tids: list[uuid.UUID], sizes: list[int], current: dict) -> tuple[dict, Summary]:
    """The rule, from scratch: O(partitions log members + members) with `order` sorted by id."""
    index = {t: i for i, t in enumerate(tids)}
    q, extras = divmod(sum(sizes), len(order))
    taken = [bytearray(n) for n in sizes]
    kept: dict[str, list] = {}
    for m in order:
        mine: list = []
        for t, ps in (current.get(m) or {}).items():
            i = index.get(t)
            if i is not None:
                size, flags = sizes[i], taken[i]
                mine += [(i, p) for p in ps if p < size and not flags[p]]
        mine.sort()
        limit = q
        if len(mine) > q and extras > 0:
            limit, extras = q + 1, extras - 1
        del mine[limit:]
        for i, p in mine:
            taken[i][p] = 1
        kept[m] = mine
    # (count, position in id order): ints compare faster than ids, in the same order.
    heap = [(len(kept[m]), k) for k, m in enumerate(order)]
    heapq.heapify(heap)
    added: dict[str, list] = {}
    for i, flags in enumerate(taken):
        p = flags.find(0)
        while p != -1:
            count, k = heap[0]
            added.setdefault(order[k], []).append((i, p))
            heapq.heapreplace(heap, (count + 1, k))
            p = flags.find(0, p + 1)
    result, counts = {}, {}
    for m in order:
        mine, more, before = kept[m], added.get(m), current.get(m)
        counts[m] = len(mine) + (len(more) if more else 0)
        if more is None and before is not None and len(mine) == sum(map(len, before.values())):
            result[m] = before  # all of it kept: the same value, so the caller sees it unchanged cheaply
        else:
            result[m] = _assignment(tids, mine + more if more else mine)
    heavy = [m for m in order if counts[m] > q]
    return result, Summary((tuple(tids), tuple(sizes)), order, counts, heavy, q, result)


def join(s: Summary, newcomer: str, current: dict) -> Assigned | None:
    """The rule's outcome when `current` is s.result and `newcomer` (holding nothing) joins; updates s.
    None when the summary does not fit (then the caller computes in full)."""
    tids, sizes = s.key
    q, r = divmod(sum(sizes), len(s.order) + 1)
    # Those holding more than q keep q + 1 if among the first r of them, else q; all others keep theirs.
    above, start = (s.heavy, r) if q == s.q else (s.order, 0)
    index = {t: i for i, t in enumerate(tids)}
    result = Assigned(current)
    freed: list = []
    changed = [newcomer]
    for k in range(start, len(above)):
        m = above[k]
        keep = q + 1 if k < r else q
        if s.counts[m] > keep:
            result[m], gone = _shed(index, current[m], s.counts[m] - keep)
            freed += gone
            s.counts[m] = keep
            changed.append(m)
    if len(freed) != q:  # the newcomer takes them all: it is the only member below q
        return None
    freed.sort()
    result[newcomer] = _assignment(tids, freed)
    result.changed = changed
    s.counts[newcomer] = q
    s.heavy = list(above[:r])
    s.q = q
    bisect.insort(s.order, newcomer)
    s.result = result
    s.token = object()
    return result


# Tests set it: every target found by its token is also compared with the current one, as without.
VERIFY_TOKENS = False


class Assigned(dict):
    """An assignor's result that may also name, in `changed`, every member whose target can differ from
    the `current` it was given (the others hold the very same objects): the caller then compares only
    those, not all the members. None: not known (compare them all). `token`: the incremental step that
    computed it from a `current` holding the members' targets only (Summary.token)."""

    changed: list[str] | None = None
    token: object = None


class Memory:
    """The last MEMORY summaries, newest last."""

    def __init__(self) -> None:
        self._summaries: OrderedDict[int, Summary] = OrderedDict()
        self._next = 0

    def assign(self, member_ids, tids: list[uuid.UUID], sizes: list[int], current: dict,
               joining: str | None = None, current_token: object = None) -> dict:
        """`joining`: the member likely to be the one newcomer, if the caller knows (a hint: checked).
        `current_token`: the token of the step whose result `current` is, as far as the caller knows
        (the group's target_token: no target change since that step's records)."""
        if not sum(sizes):
            return {m: {} for m in member_ids}
        key = (tuple(tids), tuple(sizes))
        found = self._find(key, member_ids, current, joining, current_token)
        if found is not None:
            slot, s, newcomer = found
            result = join(s, newcomer, current)
            if result is not None:
                self._summaries.move_to_end(slot)
                out = Assigned(result)  # s keeps its own
                out.changed, out.token = result.changed, s.token
                return out
            del self._summaries[slot]
        result, s = full(sorted(member_ids), tids, sizes, current)
        self._remember(s)
        return dict(result)  # (no token: `current` may hold entries of non-members; the next step compares)

    def _find(self, key: tuple, member_ids, current: dict, joining: str | None, current_token: object):
        if len(member_ids) != len(current) + 1:
            return None
        if current_token is not None and joining is not None and joining not in current and joining in member_ids:
            for slot, s in reversed(self._summaries.items()):
                if s.token is current_token:
                    # `current` is s.result: the step's records made it, and any target record since would
                    # have cleared the token (so no member left either: a leaving member's target goes with
                    # it); the same size rules out stale entries beside it. So the joining member is the
                    # one newcomer, without comparing them all.
                    if s.key != key or len(s.result) != len(current):
                        break
                    if VERIFY_TOKENS:
                        assert s.result == current and member_ids - current.keys() == {joining}
                    return slot, s, joining
            # not found: compare, as without a token
        if joining is not None and joining in member_ids and joining not in current:
            # then it is the one newcomer iff every current member is still a member (a lookup each, in C)
            if not member_ids >= current.keys():
                return None
            newcomer = joining
        else:
            missing = member_ids - current.keys()
            if len(missing) != 1:
                return None
            newcomer = next(iter(missing))
        for token, s in reversed(self._summaries.items()):
            if s.key == key and len(s.result) == len(current) and s.result == current:
                return token, s, newcomer
        return None

    def _remember(self, s: Summary) -> None:
        self._summaries[self._next] = s
        self._next += 1
        while len(self._summaries) > MEMORY:
            self._summaries.popitem(last=False)
