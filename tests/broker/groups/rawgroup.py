"""Raw-protocol group members for the tests: one wire connection each (a parked JoinGroup blocks
its connection, as with a real client's coordinator connection), requests built with our codecs."""
from __future__ import annotations

from kcoord.protocol import messages as m
from kcoord.protocol.client import KafkaWireClient

TOPIC = "raw-topic"


def subscription(topics=(TOPIC,)) -> bytes:
    return m.encode_versioned("ConsumerProtocolSubscription",
                              m.ConsumerProtocolSubscription(topics=list(topics)), 0)


def assignment(partitions, topic=TOPIC) -> bytes:
    tp = m.ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=list(partitions))
    return m.encode_versioned("ConsumerProtocolAssignment",
                              m.ConsumerProtocolAssignment(assigned_partitions=[tp], user_data=None), 0)


class Member:
    """A group member speaking one JoinGroup version (and matching Sync/Heartbeat/Leave versions)."""

    def __init__(self, bootstrap: str, group: str, join_version: int, instance_id: str | None = None,
                 session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 10_000) -> None:
        self.client = KafkaWireClient.connect(bootstrap, timeout=30, client_id=f"raw-{instance_id or 'dyn'}")
        self.group = group
        self.join_version = join_version
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation_id = -1
        self.protocol_name = "range"

    # Versions of the other membership APIs that go with a JoinGroup version (as clients pair them).
    @property
    def sync_version(self) -> int:
        return {0: 0, 3: 2, 4: 2, 5: 3, 7: 5, 9: 5}.get(self.join_version, 3)

    @property
    def heartbeat_version(self) -> int:
        return {0: 0, 3: 2, 4: 2, 5: 3, 7: 4, 9: 4}.get(self.join_version, 3)

    def close(self) -> None:
        self.client.close()

    def send_join(self, protocols=None) -> None:
        protocols = protocols or [("range", subscription())]
        self.client.send(m.JoinGroupRequest(
            group_id=self.group, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type="consumer",
            protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=md) for n, md in protocols],
            reason=None), self.join_version)

    def receive_join(self):
        resp = self.client.receive()
        if resp.member_id:
            self.member_id = resp.member_id
        if resp.error_code == 0:
            self.generation_id = resp.generation_id
        return resp

    def join(self, protocols=None):
        self.send_join(protocols)
        return self.receive_join()

    def send_sync(self, assignments: dict[str, bytes] | None = None, protocol_type="consumer",
                  protocol_name: str | None = "range", version: int | None = None) -> None:
        item = m.SyncGroupRequest.SyncGroupRequestAssignment
        self.client.send(m.SyncGroupRequest(
            group_id=self.group, generation_id=self.generation_id, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=[item(member_id=k, assignment=v) for k, v in (assignments or {}).items()]),
            self.sync_version if version is None else version)

    def sync(self, assignments=None, **kwargs):
        self.send_sync(assignments, **kwargs)
        return self.client.receive()

    def heartbeat(self, member_id: str | None = None, generation_id: int | None = None) -> int:
        resp = self.client.request(m.HeartbeatRequest(
            group_id=self.group, generation_id=self.generation_id if generation_id is None else generation_id,
            member_id=self.member_id if member_id is None else member_id,
            group_instance_id=self.instance_id), self.heartbeat_version)
        return resp.error_code

    def leave(self, version: int):
        if version < 3:
            request = m.LeaveGroupRequest(group_id=self.group, member_id=self.member_id)
        else:
            request = m.LeaveGroupRequest(group_id=self.group, members=[m.LeaveGroupRequest.MemberIdentity(
                member_id=self.member_id, group_instance_id=self.instance_id, reason="test leaves")])
        return self.client.request(request, version)
