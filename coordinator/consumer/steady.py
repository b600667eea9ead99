"""A steady ConsumerGroupHeartbeat: one that changes nothing, answered without the full path.

Most heartbeats of a formed group are these: the member is reconciled at the group's epoch, sends no
subscription field, comes from the same client, and the topics it subscribes to are as they were. The full
path (heartbeat.ConsumerGroupHeartbeat._heartbeat) would build the updated member, find it equal, write
nothing and answer with no assignment; this answers the same without building it. What the member reports
owning only matters to a member being reconciled, so it may be sent. Regex subscriptions take the full
path (a heartbeat may schedule their background resolution: regex_refresh.py).

Two callers: the full path's first step (`steady_heartbeat`, inside the group's write lane), and the frame
fast path (`ConsumerGroupHeartbeat.steady`, from the fields alone, only while no write of the group is in
flight). Both decide with `steady_group`.
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


def is_steady_shape(member_epoch: int, instance_id, rack_id, rebalance_timeout_ms: int, subscribed_topic_names,
                    subscribed_topic_regex, server_assignor) -> bool:
    """A heartbeat that sends no field of the member: what a stable Java or librdkafka consumer sends."""
    return (member_epoch > 0 and instance_id is None and rack_id is None and rebalance_timeout_ms == -1
            and subscribed_topic_names is None and subscribed_topic_regex is None and server_assignor is None)


def steady_group(hb, group_id: str, member_id: str, member_epoch: int, client_id: str, client_host: str):
    """The group whose member a steady-shaped heartbeat of these fields keeps alive, or None: take the
    full path."""
    group = hb.m.groups.get(group_id)
    member = group.members.get(member_id) if group is not None else None
    if (member is None or member.member_epoch != member_epoch or member.state != STABLE
            or member.classic is not None or group.group_epoch > group.assignment_epoch
            or member_epoch != group.assignment_epoch or member.client_id != client_id
            or member.client_host != client_host or group.regexes or group.resolved_regexes):
        return None
    # the subscribed topics are as recorded (group_metadata gives the recorded object itself when so)
    metadata, recorded = hb.group_metadata(group), group.subscription_metadata
    if metadata is not recorded and metadata != recorded:
        return None
    return group


def steady_heartbeat(hb, context, req):
    """(records, result, after) as `hb._heartbeat` would give them, or None: take the full path."""
    if not is_steady_shape(req.member_epoch, req.instance_id, req.rack_id, req.rebalance_timeout_ms,
                           req.subscribed_topic_names, getattr(req, "subscribed_topic_regex", None),
                           req.server_assignor):
        return None
    gid, member_id, epoch = req.group_id, req.member_id, req.member_epoch
    if steady_group(hb, gid, member_id, epoch, context.client_id, context.client_host) is None:
        return None
    m = hb.m

    def after() -> None:
        hb.schedule_session_timeout(gid, member_id)
        g = m.groups.get(gid)
        m.events.group_members(gid, len(g.members) if g else 0)

    return [], HeartbeatResult(ErrorCode.NONE, None, member_id, epoch,
                               m.config.consumer_group_heartbeat_interval_ms, None), after
