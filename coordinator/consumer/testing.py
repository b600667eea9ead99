"""Test helpers for consumer groups: the deterministic CoordinatorContext with a topics image and a
`heartbeat` that sends ConsumerGroupHeartbeat as a client would (Kafka's
GroupMetadataManagerTestContext.consumerGroupHeartbeat)."""
from __future__ import annotations

import uuid

from kcoord.coordinator.consumer.heartbeat import HeartbeatResult
from kcoord.coordinator.consumer.topics_image import StaticTopicsImage
from kcoord.coordinator.results import RequestContext
from kcoord.coordinator.testing import Capture, CoordinatorContext
from kcoord.protocol import messages as m

_UNSET = object()


class ConsumerGroupContext(CoordinatorContext):
    def __init__(self, topics: dict[str, int] | None = None, **config_overrides) -> None:
        super().__init__(**config_overrides)
        self.topics = StaticTopicsImage()
        self.gc.topics = self.topics
        for name, partitions in (topics or {}).items():
            self.add_topic(name, partitions)
        self._ids = 0

    def add_topic(self, name: str, partitions: int) -> uuid.UUID:
        """Create a topic, or change its partition count (keeping its id)."""
        old = self.topics.topics.get(name)
        topic_id = old[0] if old else uuid.uuid5(uuid.NAMESPACE_DNS, name)
        self.topics.topics[name] = (topic_id, partitions)
        self.topics.metadata_version += 1
        return topic_id

    def topic_id(self, name: str) -> uuid.UUID:
        return self.topics.topics[name][0]

    def consumer_group(self, group_id: str):
        return self.shard(group_id).consumer_manager.groups.get(group_id)

    def heartbeat(self, group_id: str, member_id: str = "", member_epoch: int = 0, *, instance_id=None,
                  rack_id=None, rebalance_timeout_ms: int | None = None, topics=_UNSET, assignor=None,
                  owned=_UNSET, regex=None, version: int = 1, callback=None) -> HeartbeatResult | None:
        """`owned`: {topic id: partitions} (default: [] on a join, else not sent); `topics`: names (default:
        none on a heartbeat, required on a join). The answer, or None if it waits for a write (then it goes
        to `callback` when given)."""
        cls = m.ConsumerGroupHeartbeatRequest
        if owned is _UNSET:
            owned = {} if member_epoch == 0 else None
        if topics is _UNSET:
            topics = None
        if rebalance_timeout_ms is None:
            rebalance_timeout_ms = 300_000 if member_epoch == 0 else -1
        request = cls(group_id=group_id, member_id=member_id, member_epoch=member_epoch, instance_id=instance_id,
                      rack_id=rack_id, rebalance_timeout_ms=rebalance_timeout_ms,
                      subscribed_topic_names=None if topics is None else list(topics),
                      subscribed_topic_regex=regex, server_assignor=assignor,
                      topic_partitions=None if owned is None else [
                          cls.TopicPartitions(topic_id=t, partitions=sorted(p)) for t, p in owned.items()])
        capture = Capture() if callback is None else callback
        self.gc.consumer_group_heartbeat(RequestContext("client", "/127.0.0.1", version), request, capture)
        return capture.result if callback is None and capture.called else None

    # ------------------------------------------------------------ classic members (online migration)

    def heartbeat_classic(self, group_id: str, member_id: str, generation_id: int, instance_id=None):
        """A classic Heartbeat (the API's name is taken here by ConsumerGroupHeartbeat)."""
        return CoordinatorContext.heartbeat(self, group_id, member_id, generation_id, instance_id)

    def leave_async(self, group_id: str, *members):
        """LeaveGroup; for a consumer group's classic members the answer comes once durable."""
        got = Capture()
        member = m.LeaveGroupRequest.MemberIdentity
        request = m.LeaveGroupRequest(group_id=group_id, members=[
            member(member_id=mid, group_instance_id=iid, reason=why) for mid, iid, why in members])
        result = self.gc.leave_group(RequestContext("client", "/127.0.0.1", 5), request, got)
        return result if result is not None else got.result
