"""The errors the consumer group steps raise: a leaf that every step imports and that imports none of them.

`GroupError` is an operation refused: the error code and message the client gets, nothing written
(ConsumerGroupManager.submit catches it and answers with the operation's failure). The others are raised
below the steps and turned into a client's answer (or a log line) by the step that catches them.
"""
from __future__ import annotations

from kcoord.protocol.errors import ErrorCode


class GroupError(Exception):
    """An operation refused: the error code and message the client gets; nothing is written."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message


class FencedMemberEpoch(Exception):
    """The member must abandon its partitions and rejoin (FENCED_MEMBER_EPOCH): reconciliation.py."""


class InvalidRegex(ValueError):
    """A SubscribedTopicRegex that does not compile, or RE2 would refuse (INVALID_REGULAR_EXPRESSION)."""


class CustomAssignorUserData(Exception):
    """A classic assignment carries user data a custom assignor needs: an upgrade would lose it."""


class PartitionOwnedTwice(Exception):
    """A replayed assignment gives a partition that another member still owns (Kafka: IllegalStateException)."""
