"""The broker as the group coordinator sees it: its topics as the coordinator's TopicsImage, its metrics
as the coordinator's event sink."""
from __future__ import annotations

from kcoord.coordinator.consumer.topics_image import TopicsImage
from kcoord.coordinator.events import CoordinatorEvents


class BrokerTopics(TopicsImage):
    """The broker's topic manager as the coordinator's topics image (consumer groups subscribe by name)."""

    def __init__(self, broker) -> None:
        self.broker = broker

    def topic(self, name: str):
        topics = self.broker.topics
        t = topics.get(name) if topics is not None else None
        return None if t is None or t.internal else (t.topic_id, t.partitions)

    def topic_name(self, topic_id):
        topics = self.broker.topics
        t = topics.by_id(topic_id) if topics is not None else None
        return None if t is None else t.name

    def names(self):
        topics = self.broker.topics
        return [] if topics is None else [t.name for t in topics.all() if not t.internal]

    def version(self):
        topics = self.broker.topics
        return 0 if topics is None else topics.metadata_version


class MetricsEvents(CoordinatorEvents):
    """The coordinator's events as broker metrics."""

    def __init__(self, metrics) -> None:
        self.metrics = metrics

    def rebalance(self, group_id: str, cause: str) -> None:
        if self.metrics is not None:
            self.metrics.rebalance(group_id, cause)

    def group_members(self, group_id: str, members: int) -> None:
        if self.metrics is not None:
            self.metrics.group_members(group_id, members)
