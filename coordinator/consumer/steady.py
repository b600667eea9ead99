"""A steady ConsumerGroupHeartbeat: one that changes nothing, answered without the full path.

Most heartbeats of a formed group are these: the member is reconciled at the group's epoch, sends no
subscription field, comes from the same client, and the topics it subscribes to are as they were. The full
path (heartbeat.ConsumerGroupHeartbeat._heartbeat) would build the updated member, find it equal, write
nothing and answer with no assignment; this answers the same without building it. What the member reports
owning only matters to a member being reconciled, so it may be sent. Regex subscriptions take the full
path (a heartbeat may schedule their background resolution: regex_refresh.py).
"""
from __future__ import annotations

from typing import NamedTuple

from kcoord.coordinator.consumer.member import STABLE, Assignment
from kcoord.protocol.errors import ErrorCode


class HeartbeatResult(NamedTuple):
    """What a ConsumerGroupHeartbeat answers (heartbeat.py's, defined here where both paths build it)."""
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: not sent this time


def steady_heartbeat(hb, context, req):
    """(records, result, after) as `hb._heartbeat` would give them, or None: take the full path."""
    if (req.member_epoch <= 0 or req.instance_id is not None or req.rack_id is not None
            or req.rebalance_timeout_ms != -1 or req.subscribed_topic_names is not None
            or getattr(req, "subscribed_topic_regex", None) is not None or req.server_assignor is not None):
        return None
    m = hb.m
    group = m.groups.get(req.group_id)
    member = group.members.get(req.member_id) if group is not None else None
    if (member is None or member.member_epoch != req.member_epoch or member.state != STABLE
            or member.classic is not None or group.group_epoch > group.assignment_epoch
            or member.member_epoch != group.assignment_epoch or member.client_id != context.client_id
            or member.client_host != context.client_host or group.regexes or group.resolved_regexes
            or hb.subscription_metadata(group, {member.member_id}, member) != group.subscription_metadata):
        return None
    gid, member_id = req.group_id, member.member_id

    def after() -> None:
        hb.schedule_session_timeout(gid, member_id)
        g = m.groups.get(gid)
        m.events.group_members(gid, len(g.members) if g else 0)

    return [], HeartbeatResult(ErrorCode.NONE, None, member_id, member.member_epoch,
                               m.config.consumer_group_heartbeat_interval_ms, None), after
