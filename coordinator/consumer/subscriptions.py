"""What a consumer group's members subscribe to, as a heartbeat needs it: the topics of a member (its
names and what its regex resolved to), the group's subscription metadata (Kafka's subscribed topic names
and their partition counts), and the tombstones of resolutions no member uses any more.

A regex contributes the topics of its last recorded resolution (ConsumerGroup.resolved_regexes), never a
match made on the heartbeat: until its background resolution (regex_refresh.py) is written, a regex
subscribes to nothing, as in Kafka 4 (ConsumerGroup.computeSubscribedTopicNames counts resolved
regexes only)."""
from __future__ import annotations

from collections.abc import Mapping

from kcoord.coordinator.consumer import records as r
from kcoord.coordinator.consumer.consumer_group import ConsumerGroup, ResolvedRegex
from kcoord.coordinator.consumer.context import ConsumerContext
from kcoord.coordinator.consumer.member import ConsumerGroupMember


class Subscriptions:
    def __init__(self, context: ConsumerContext) -> None:
        self.m = context  # its topics image

    def regex_tombstones(self, group: ConsumerGroup, exclude: set, new: ConsumerGroupMember | None) -> list:
        """The tombstone of each recorded resolution no member uses once `exclude` are taken out and `new`
        put in (Kafka: newConsumerGroupRegularExpressionTombstone when the last member using a regex
        changes it or leaves)."""
        if not group.resolved_regexes:
            return []
        in_use = {regex for member_id, regex in group.regexes.items() if member_id not in exclude}
        if new is not None and new.subscribed_topic_regex:
            in_use.add(new.subscribed_topic_regex)
        return [r.regex_tombstone(group.group_id, regex) for regex in sorted(set(group.resolved_regexes) - in_use)]

    def subscription_metadata(self, group: ConsumerGroup, exclude: set, new: ConsumerGroupMember | None,
                              resolved: Mapping[str, ResolvedRegex] | None = None) -> dict[str, r.TopicMetadata]:
        """The subscribed topics that exist, name -> (id, partitions), for the group with the members of
        `exclude` taken out and `new` put in; `resolved`: the regexes' resolutions to count (default: the
        recorded ones). (Not to be changed: it may be the group's memo.)"""
        if resolved is None and new is not None and len(exclude) == 1 and new.member_id in exclude:
            old = group.members.get(new.member_id)
            if old is not None and (old is new or old.subscription() == new.subscription()):
                return self.group_metadata(group)  # the group's own subscriptions, as they are
        return self._compute(group, exclude, new, group.resolved_regexes if resolved is None else resolved)

    def group_metadata(self, group: ConsumerGroup) -> dict[str, r.TopicMetadata]:
        """The subscribed topics that exist for the group's subscriptions as they are: memoized until they,
        their regexes' resolutions (ConsumerGroup.replay bumps subscriptions_version) or the topics change.
        When equal to the group's recorded subscription metadata it is that object (a steady heartbeat's
        check is then `is`)."""
        key = (group.subscriptions_version, self.m.topics.version())
        memo = group.metadata_memo
        if memo is not None and memo[0] == key:
            return memo[1]
        out = self._compute(group, set(), None, group.resolved_regexes)
        if out == group.subscription_metadata:
            out = group.subscription_metadata
        group.metadata_memo = (key, out)
        return out

    def _compute(self, group: ConsumerGroup, exclude: set, new: ConsumerGroupMember | None,
                 resolved: Mapping[str, ResolvedRegex]) -> dict[str, r.TopicMetadata]:
        gone = [group.members[m] for m in exclude if m in group.members]
        names = {name for name, count in group.topic_counts.items()
                 if count - sum(name in m.subscribed_topic_names for m in gone) > 0}
        for member_id, regex in group.regexes.items():
            if member_id not in exclude:
                names |= _resolved_topics(resolved, regex)
        if new is not None:
            names |= new.subscribed_topic_names | _resolved_topics(resolved, new.subscribed_topic_regex)
        out = {}
        for name in names:
            topic = self.m.topics.topic(name)
            if topic is not None:
                out[name] = topic
        return out

    @staticmethod
    def topics_of(group: ConsumerGroup, member: ConsumerGroupMember) -> frozenset[str]:
        """The member's topics: its names, and those its regex resolved to (none while unresolved)."""
        if not member.subscribed_topic_regex:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | _resolved_topics(group.resolved_regexes, member.subscribed_topic_regex)


def _resolved_topics(resolved: Mapping[str, ResolvedRegex], regex: str | None) -> frozenset[str]:
    known = resolved.get(regex) if regex else None
    return frozenset() if known is None else known.topics
