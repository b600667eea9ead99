"""Timer control for tests (the admin endpoint, `kcoord groups expire-member / fire-timers /
run-retention`, the pytest fixture): make time-dependent group behaviour happen now. GroupRuntime's
methods of the same names delegate here (docs/CONTRACTS.md)."""
from __future__ import annotations

from typing import Any

from kcoord.coordinator.purgatory import join_timer_key
from kcoord.coordinator.rebalance import sync_key
from kcoord.protocol.errors import ErrorCode


def expire_member(runtime: Any, group_id: str, member_id: str) -> bool:
    """Expire `member_id`'s session now, as if it had stopped heartbeating: it leaves the group and the
    rebalance that follows has cause session_timeout. False if there is no such member here."""
    service = runtime.service
    shard = service.shard_for(group_id) if service is not None else ErrorCode.NOT_COORDINATOR
    if isinstance(shard, ErrorCode):
        return False
    manager = shard.group_manager
    group = manager.get_group(group_id)
    if group is None:
        return False
    member = group.members.get(member_id)
    if member is None:
        if not group.is_pending_member(member_id):
            return False
        manager.rebalance.remove_pending_member_and_update_group(group, member_id)
        return True
    manager.log.info("Member %s in group %s has failed, removing it from the group (session expired on request)",
                     member_id, group_id)
    manager.rebalance.remove_member_and_update_group(
        group, member, f"removing member {member_id} on heartbeat expiration", "session_timeout")
    return True


def fire_group_timers(runtime: Any, group_id: str) -> int:
    """Fire `group_id`'s pending join-phase timer (initial rebalance delay or rebalance timeout, again
    while an InitialDelayedJoin re-arms itself) and its pending-sync timer, if pending when called.
    Member sessions are left alone (expire_member). Returns how many timers fired."""
    timer = runtime.timer
    sync_entry = timer.pending(sync_key(group_id))
    fired = 0
    for _ in range(64):  # an InitialDelayedJoin re-arms at most a few times; bounded all the same
        if not timer.fire_now(join_timer_key(group_id)):
            break
        fired += 1
    if sync_entry is not None and timer.pending(sync_key(group_id)) is sync_entry:
        fired += timer.fire_now(sync_key(group_id))
    return fired


def run_offset_retention(runtime: Any) -> int:
    """Offset retention (KIP-211) now, as its periodic check runs it; returns records written (offset
    tombstones, and group tombstones for Empty groups left without offsets). 0 while loading."""
    if runtime.service is None or not runtime.loaded_event.is_set():
        return 0
    return runtime.service.cleanup_group_metadata()
