"""A request from this node to another (cluster mode): the transaction markers a coordinator sends to
partition leaders, the KIP-890 verification a partition leader asks of a transaction coordinator. The
connection is kcoord.cluster.node_connection's (the replica fetchers' too); here, what the requests share.
"""
from __future__ import annotations

from collections.abc import Iterable

from kcoord.cluster.node_connection import NodeConnection, node_address

__all__ = ["NodeConnection", "by_topic", "node_address"]


def by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """Partitions grouped as requests carry them: topic -> partition indexes, in order."""
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        topics.setdefault(topic, []).append(partition)
    return topics
