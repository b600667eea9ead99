"""What the consumer group coordinator knows of the cluster's topics (Kafka's MetadataImage.topics()):
name -> (topic id, partition count), and id -> name. The broker supplies one over its topic manager."""
from __future__ import annotations

import uuid


class TopicsImage:
    """No topics (a coordinator without a broker, in tests that do not need any)."""

    def topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None

    def names(self) -> list[str]:
        """Every (non-internal) topic name, for regex subscriptions."""
        return []

    def version(self) -> int:
        """Rises with every topic change (Kafka: the metadata image's offset); recorded with a regex's
        resolution."""
        return 0


class StaticTopicsImage(TopicsImage):
    """A fixed set of topics (tests): name -> (id, partitions)."""

    def __init__(self, topics: dict[str, tuple[uuid.UUID, int]] | None = None) -> None:
        self.topics = dict(topics or {})
        self.metadata_version = 1  # a test that changes `topics` itself must bump it (memos are keyed by it)

    def topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        return self.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, (tid, _) in self.topics.items() if tid == topic_id), None)

    def names(self) -> list[str]:
        return list(self.topics)

    def version(self) -> int:
        return self.metadata_version


NO_TOPICS = TopicsImage()
