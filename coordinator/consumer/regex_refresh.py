"""Resolving a consumer group's regular expressions in the background, as Kafka 4's GroupMetadataManager
does (maybeUpdateRegularExpressions, refreshRegularExpressions, handleRegularExpressionsResult).

A heartbeat never resolves a regex. It decides (`update_regexes`) whether the group's regexes need
resolving -- a regex no resolution covers, topics changed since the last resolution, or the last one older
than group.consumer.regex.refresh.interval.ms -- and, once its records are durable, `RegexRefresh.schedule`
puts the work on the shard's timer (delay 0, keyed by group: one refresh of a group at a time, and none
within REGEX_BATCH_REFRESH_MIN_INTERVAL_MS of the last). The timer's callback only reads the topics image
and resolves (`resolve`); what it found is applied as an operation of the group, like a heartbeat: it
writes a ConsumerGroupRegularExpression record per regex still in use and, if what the group subscribes
to changed, the subscription metadata and a group epoch bump with cause `regex_resolved`. The group
changes when those records are replayed; the member's next heartbeat computes the new target.

Meanwhile a regex subscribes to nothing (subscriptions.py): a member subscribing to literal topics and a
regex gets the literal topics at once and the regex's a heartbeat after the resolution is written; a
member subscribing to a regex only gets an empty assignment first.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.consumer_group import ConsumerGroup, ResolvedRegex
from kcoord.coordinator.consumer.context import ConsumerContext
from kcoord.coordinator.consumer.errors import InvalidRegex
from kcoord.coordinator.consumer.member import ConsumerGroupMember
from kcoord.coordinator.consumer.regex import compile_regex
from kcoord.coordinator.consumer.subscriptions import Subscriptions

# Kafka's GroupMetadataManager.REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: the least time between two refreshes
# of one group's regexes, whatever asks for one.
REGEX_BATCH_REFRESH_MIN_INTERVAL_MS = 10_000

# What a heartbeat did to the member's regex (Kafka's UpdateRegularExpressionsResult).
NO_CHANGE, REGEX_UPDATED, REGEX_UPDATED_AND_RESOLVED = "no_change", "regex_updated", "regex_updated_and_resolved"

log = logging.getLogger("kcoord.coordinator.consumer.regex")


def update_regexes(group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember, now_ms: int,
                   topics_version: int, refresh_interval_ms: int, refreshing: bool
                   ) -> tuple[str, frozenset[str] | None]:
    """Kafka's maybeUpdateRegularExpressions, without its records (subscriptions.regex_tombstones writes
    those): -> (what happened to the member's regex, the regexes to resolve now or None). A new regex
    no other member uses needs a resolution and bumps nothing yet; one another member uses and that is
    resolved bumps the group epoch now (REGEX_UPDATED_AND_RESOLVED). `refreshing`: a refresh of the group
    is scheduled or its result not yet applied."""
    old, new = member.subscribed_topic_regex or None, updated.subscribed_topic_regex or None
    result, required = NO_CHANGE, False
    if old != new:
        result = REGEX_UPDATED
        if new is not None:
            others = {regex for member_id, regex in group.regexes.items() if member_id != member.member_id}
            if new not in others:
                required = True
            elif new in group.resolved_regexes:
                result = REGEX_UPDATED_AND_RESOLVED
    if not required and not group.regexes:
        return result, None
    if refreshing:
        return result, None
    last = group.last_regex_refresh_ms()
    if now_ms <= last + REGEX_BATCH_REFRESH_MIN_INTERVAL_MS:
        return result, None
    in_use = {regex for member_id, regex in group.regexes.items() if member_id != member.member_id}
    if new is not None:
        in_use.add(new)
    required = (required or len(in_use) != len(group.resolved_regexes)
                or group.last_regex_version() < topics_version
                or now_ms > last + refresh_interval_ms)
    return result, frozenset(in_use) if required and in_use else None


def resolve(group_id: str, regexes: Iterable[str], topic_names: Iterable[str], version: int,
            now_ms: int) -> dict[str, ResolvedRegex]:
    """Kafka's refreshRegularExpressions: each regex's whole-name matches among `topic_names`, stamped
    with the topics image `version` and the time. A regex that does not compile (validated when it was
    sent, so only from a log written elsewhere) matches nothing."""
    compiled = {}
    for regex in regexes:
        try:
            compiled[regex] = compile_regex(regex)
        except InvalidRegex as e:
            log.error("[GroupId %s] Couldn't parse regular expression '%s' due to `%s`. Ignoring it.",
                      group_id, regex, e)
            compiled[regex] = None
    names = list(topic_names)
    return {regex: ResolvedRegex(frozenset() if p is None else frozenset(n for n in names if p.fullmatch(n)),
                                 version, now_ms)
            for regex, p in compiled.items()}


def resolution_records(group: ConsumerGroup, resolved: dict[str, ResolvedRegex], subscriptions,
                       trigger_member: str) -> tuple[list, int | None]:
    """Kafka's handleRegularExpressionsResult: a record per resolved regex the group still uses; if one
    now matches other topics, or the subscription metadata with the new resolutions differs, that
    metadata and a group epoch bump with cause `regex_resolved`. -> (records, the new epoch or None)."""
    gid = group.group_id
    in_use = set(group.regexes.values())
    records: list = []
    bump = False
    after = dict(group.resolved_regexes)
    for regex in sorted(resolved):
        if regex not in in_use:
            continue  # no member subscribes to it any more
        new = resolved[regex]
        old = group.resolved_regexes.get(regex)
        if _topics(old) != new.topics:
            bump = True
        after[regex] = new
        records.append(r.regex_record(gid, regex, new.topics, new.version, new.timestamp_ms))
    if not records:
        return [], None
    metadata = subscriptions.subscription_metadata(group, exclude=set(), new=None, resolved=after)
    if metadata != group.subscription_metadata:
        bump = True
        records.append(r.subscription_metadata_record(gid, metadata))
    if not bump:
        return records, None
    epoch = group.group_epoch + 1
    changed = sorted(x for x in resolved if x in in_use and after[x].topics != _topics(group.resolved_regexes.get(x)))
    records.append(r.group_epoch_record(gid, epoch, "regex_resolved", f"Regular expressions {changed} were "
                                        f"resolved; the group epoch is bumped to {epoch}.", trigger_member))
    return records, epoch


def _topics(resolved: ResolvedRegex | None) -> frozenset[str]:
    return frozenset() if resolved is None else resolved.topics


class RegexRefresh:
    """The shard's background regex resolutions (Kafka's CoordinatorExecutor, keyed "<group>-regex"):
    which groups have one scheduled or not yet applied, on the manager's timer and clock."""

    def __init__(self, context: ConsumerContext, subscriptions: Subscriptions) -> None:
        self.m = context
        self.subscriptions = subscriptions
        self._refreshing: set[str] = set()

    def is_refreshing(self, group_id: str) -> bool:
        return group_id in self._refreshing

    def schedule(self, group_id: str, regexes: frozenset[str], trigger_member: str) -> None:
        if group_id in self._refreshing:
            return  # (two heartbeats of one batch may both ask)
        self._refreshing.add(group_id)
        self.m.timer.schedule(("consumer-regex", group_id), 0,
                              lambda: self._resolve(group_id, regexes, trigger_member))

    def _resolve(self, group_id: str, regexes: frozenset[str], trigger_member: str) -> None:
        """The background task: resolve against the topics image as it is now, then hand the result to
        the group's queue of operations."""
        m = self.m
        start = m.clock.now_ms()
        m.log.debug("[GroupId %s] Refreshing regular expressions: %s", group_id, sorted(regexes))
        names = m.topics.names()
        resolved = resolve(group_id, regexes, names, m.topics.version(), start)
        m.log.info("[GroupId %s] Scanned %d topics to refresh regular expressions %s in %dms.", group_id, len(names),
                   sorted(regexes), m.clock.now_ms() - start)
        m.submit(group_id, lambda: self._apply(group_id, resolved, trigger_member),
                 lambda _result: None, lambda _e, _msg: None)

    def _apply(self, group_id: str, resolved: dict[str, ResolvedRegex], trigger_member: str):
        """The operation writing a resolution (it is no longer in flight, written or not)."""
        self._refreshing.discard(group_id)
        m = self.m
        group = m.groups.get(group_id)
        if group is None:
            m.log.debug("[GroupId %s] Received result of regular expression resolution but it no longer exists.",
                        group_id)
            return [], None, None
        records, epoch = resolution_records(group, resolved, self.subscriptions, trigger_member)
        if epoch is None:
            return records, None, None
        m.log.info("[GroupId %s] Bumped group epoch to %d (regex_resolved).", group_id, epoch)

        def after() -> None:
            m.events.rebalance(group_id, "regex_resolved")

        return records, None, after

    def cancel_all(self) -> None:
        """The shard unloads: no refresh runs or is applied (an applied one queued fails with the lane)."""
        for group_id in self._refreshing:
            self.m.timer.cancel(("consumer-regex", group_id))
        self._refreshing.clear()
