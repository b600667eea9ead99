"""Regular expression subscriptions (KIP-848's SubscribedTopicRegex, ConsumerGroupHeartbeat v1).

Kafka compiles them with RE2/J and a topic is subscribed when the whole name matches. Here Python's
`re` (fullmatch) serves the common subset; what RE2 refuses and `re` would accept -- lookaround and
backreferences -- is refused too (INVALID_REGULAR_EXPRESSION). Not supported here although RE2/J has
them: \\Q...\\E quoting and \\p{..} Unicode classes (refused as invalid by `re`). Internal topics never
match. A heartbeat only validates a regex; it is resolved in the background and its resolution written
as ConsumerGroupRegularExpression records (kcoord.coordinator.consumer.regex_refresh), as Kafka 4 does.
"""
from __future__ import annotations

import functools
import re

from kcoord.coordinator.consumer.errors import InvalidRegex

_NOT_RE2 = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=")


@functools.lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> re.Pattern:
    if _NOT_RE2.search(pattern):
        raise InvalidRegex(f"SubscribedTopicRegex {pattern} is not a valid regular expression (RE2 syntax).")
    try:
        return re.compile(pattern)
    except re.error as e:
        raise InvalidRegex(f"SubscribedTopicRegex {pattern} is not a valid regular expression: {e}.") from None


def matching_topics(pattern: str, names) -> set[str]:
    compiled = compile_regex(pattern)
    return {name for name in names if compiled.fullmatch(name)}
