"""The range assignor (Kafka's server-side assignor/RangeAssignor): per topic, its members in order --
static members first by instance id, then the others by member id -- get contiguous ranges of
partitions, the first `partitions % members` one more. Members subscribed to co-partitioned topics so
get the same partition numbers of each. Like Kafka's (4.0), it is not sticky."""
from __future__ import annotations

import uuid


def _order(members: dict, member_id: str) -> tuple:
    instance_id = members[member_id].instance_id
    return (0, instance_id) if instance_id is not None else (1, member_id)


class RangeAssignor:
    name = "range"

    def assign(self, members: dict, topics: dict[uuid.UUID, int], current: dict) -> dict:
        out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in members}
        ordered = sorted(members, key=lambda m: _order(members, m))
        for tid in sorted(topics):
            subscribed = [m for m in ordered if tid in members[m].subscribed_topic_ids]
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
