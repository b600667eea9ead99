"""What a consumer group's members subscribe to, as a heartbeat needs it: the topics of a member (its
names and what its regex matches), the group's subscription metadata (Kafka's subscribed topic names and
their partition counts), and the ConsumerGroupRegularExpression records of its regexes' resolutions."""
from __future__ import annotations

from coordinator.consumer import records as r
from coordinator.consumer.consumer_group import ConsumerGroup
from coordinator.consumer.member import ConsumerGroupMember
from coordinator.consumer.regex import InvalidRegex, matching_topics


class Subscriptions:
    def __init__(self, manager) -> None:
        self.m = manager  # its topics image and clock

    def regex_resolutions(self, group: ConsumerGroup, exclude: set, new: ConsumerGroupMember | None
                          ) -> tuple[list, bool]:
        """The ConsumerGroupRegularExpression records this change needs: a resolution for each regex in
        use whose matching topics differ from its recorded one, a tombstone for each recorded regex no
        member uses any more. Kafka resolves in the background and records the result; here the
        heartbeat that needs a resolution makes it (the same records, one heartbeat sooner).
        -> (records, whether an already resolved regex now matches other topics)."""
        in_use = {regex for member_id, regex in group.regexes.items() if member_id not in exclude}
        if new is not None and new.subscribed_topic_regex:
            in_use.add(new.subscribed_topic_regex)
        if not in_use and not group.resolved_regexes:
            return [], False
        gid, out, changed = group.group_id, [], False
        for regex in sorted(in_use):
            topics = frozenset(self._matching(regex))
            known = group.resolved_regexes.get(regex)
            if known is None or known.topics != topics:
                out.append(r.regex_record(gid, regex, topics, self.m.topics.version(), self.m.clock.now_ms()))
                changed = changed or known is not None
        out += [r.regex_tombstone(gid, regex) for regex in sorted(set(group.resolved_regexes) - in_use)]
        return out, changed

    def subscription_metadata(self, group: ConsumerGroup, exclude: set, new: ConsumerGroupMember | None
                              ) -> dict[str, r.TopicMetadata]:
        """The subscribed topics that exist, name -> (id, partitions), for the group with the members of
        `exclude` taken out and `new` put in. (Not to be changed: it may be the group's memo.)"""
        if new is not None and len(exclude) == 1 and new.member_id in exclude:
            old = group.members.get(new.member_id)
            if old is not None and (old is new or old.subscription() == new.subscription()):
                # the group's own subscriptions, as they are: memoized until they or the topics change
                key = (group.subscriptions_version, self.m.topics.version())
                memo = group.metadata_memo
                if memo is not None and memo[0] == key:
                    return memo[1]
                out = self._compute(group, exclude, new)
                group.metadata_memo = (key, out)
                return out
        return self._compute(group, exclude, new)

    def _compute(self, group: ConsumerGroup, exclude: set, new: ConsumerGroupMember | None
                 ) -> dict[str, r.TopicMetadata]:
        gone = [group.members[m] for m in exclude if m in group.members]
        names = {name for name, count in group.topic_counts.items()
                 if count - sum(name in m.subscribed_topic_names for m in gone) > 0}
        for member_id, regex in group.regexes.items():
            if member_id not in exclude:
                names |= self._matching(regex)
        if new is not None:
            names |= self.topics_of(new)
        out = {}
        for name in names:
            topic = self.m.topics.topic(name)
            if topic is not None:
                out[name] = topic
        return out

    def topics_of(self, member: ConsumerGroupMember) -> frozenset[str]:
        """The member's topics: its names, and those its regex matches now."""
        if not member.subscribed_topic_regex:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | self._matching(member.subscribed_topic_regex)

    def _matching(self, regex: str) -> set[str]:
        try:
            return matching_topics(regex, self.m.topics.names())
        except InvalidRegex:  # validated when it was sent; a log from elsewhere may still hold one
            return set()
