"""The range assignor (Kafka's server-side RangeAssignor): per topic, its members (sorted by member id)
get contiguous ranges of partitions, the first `partitions % members` one more, so members subscribed
to co-partitioned topics get the same partition numbers of each. Not sticky (Kafka 4's keeps a member's
ranges where it can; here a change of membership may move ranges)."""
from __future__ import annotations

import uuid


class RangeAssignor:
    name = "range"

    def assign(self, members: dict, topics: dict[uuid.UUID, int], current: dict) -> dict:
        out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in members}
        for tid in sorted(topics):
            subscribed = sorted(m for m in members if tid in members[m].subscribed_topic_ids)
            if not subscribed:
                continue
            quota, extra = divmod(topics[tid], len(subscribed))
            start = 0
            for i, m in enumerate(subscribed):
                n = quota + (1 if i < extra else 0)
                if n:
                    out[m][tid] = frozenset(range(start, start + n))
                start += n
        return out
