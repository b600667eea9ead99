"""Share sessions (KIP-932): Kafka's ShareSessionCache and the share-fetch context rules of
SharePartitionManager.newContext / acknowledgeSessionUpdate, pure. No idle time is kept: a session ends
with its connection, its member's next initial request or a final request.

A share session belongs to one member of one share group on this node; it remembers which
share-partitions the member fetches, so a ShareFetch after the first names only what changed, and its
epoch orders the member's requests:

    epoch 0 (INITIAL)  ShareFetch only: open a session (replacing the member's old one, whose records
                       are released); acknowledgements are not allowed (INVALID_REQUEST)
    epoch n > 0        the session's current epoch, which then moves to n + 1 (after INT32_MAX: 1);
                       any other epoch is INVALID_SHARE_SESSION_EPOCH, no session SHARE_SESSION_NOT_FOUND
    epoch -1 (FINAL)   acknowledge and close the session (its member's records are released); a
                       ShareFetch that would fetch is INVALID_REQUEST

A ShareAcknowledge at epoch 0 is INVALID_SHARE_SESSION_EPOCH. The cache holds at most
`group.share.max.share.sessions`; a new session past it is SHARE_SESSION_LIMIT_REACHED (Kafka 4.1+).
A session belongs to the connection that opened it (Kafka 4.1+): when that connection closes, the
session goes and its member counts as gone (ShareSessionCache's ConnectionDisconnectListener, then
ShareGroupListener.onMemberLeave: its records are released) -- unless the member opened a newer session
since, on another connection.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kcoord.protocol.errors import ErrorCode

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
INT32_MAX = 2**31 - 1

SharePartitionKey = tuple[uuid.UUID, int]  # (topic id, partition) within the session's group


def next_epoch(epoch: int) -> int:
    """ShareRequestMetadata.nextEpoch: the epoch after `epoch`; wraps to 1, never back to 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


class ShareSessionError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)  # insertion-ordered set
    connection_id: str = ""


@dataclass
class FetchContext:
    """What one ShareFetch works with: the session (None for a final request, which closes it), whether
    the response lists every partition (a new session) and the session closed or replaced by it (its
    member's acquired records are to be released)."""
    session: ShareSession | None
    full: bool
    released: ShareSession | None = None


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[str, set[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        session = self._sessions.pop((group_id, member_id), None)
        if session is not None:
            self._forget_connection(session)
        return session

    def _forget_connection(self, session: ShareSession) -> None:
        keys = self._by_connection.get(session.connection_id)
        if keys is not None:
            keys.discard((session.group_id, session.member_id))
            if not keys:
                del self._by_connection[session.connection_id]

    def connection_closed(self, connection_id: str) -> list[ShareSession]:
        """The sessions the closed connection opened (their members are to be released)."""
        return [s for s in (self.remove(*key) for key in list(self._by_connection.get(connection_id, ())))
                if s is not None]

    # ---------------------------------------------------------------- ShareFetch

    def fetch_context(self, group_id: str, member_id: str, epoch: int, fetch: list[SharePartitionKey],
                      forget: list[SharePartitionKey], has_acknowledgements: bool,
                      connection_id: str = "") -> FetchContext:
        """SharePartitionManager.newContext; raises ShareSessionError."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            if fetch:
                raise ShareSessionError(ErrorCode.INVALID_REQUEST,
                                        "A final share fetch request (epoch -1) cannot fetch partitions.")
            session = self.remove(group_id, member_id)
            if session is None:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, "Share session not found.")
            return FetchContext(None, False, released=session)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise ShareSessionError(ErrorCode.INVALID_REQUEST,
                                        "Acknowledge data present in the initial share fetch request.")
            if key not in self._sessions and len(self._sessions) >= self.max_sessions:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                        "The share session cache is full.")
            old = self.remove(group_id, member_id)
            session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), dict.fromkeys(fetch),
                                   connection_id)
            self._sessions[key] = session
            self._by_connection.setdefault(connection_id, set()).add(key)
            return FetchContext(session, True, released=old)
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, "Share session not found.")
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    f"Expected share session epoch {session.epoch}, got {epoch}.")
        for tp in fetch:
            session.partitions.setdefault(tp, None)
        for tp in forget:
            session.partitions.pop(tp, None)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(session, False)

    # ---------------------------------------------------------------- ShareAcknowledge

    def acknowledge_context(self, group_id: str, member_id: str, epoch: int) -> ShareSession | None:
        """SharePartitionManager.acknowledgeSessionUpdate; raises ShareSessionError. Returns the session a
        final request (epoch -1) closes (its member's records are released after the acknowledgements),
        else None."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    "A share acknowledge request cannot open a share session (epoch 0).")
        key = (group_id, member_id)
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, "Share session not found.")
        if epoch == FINAL_EPOCH:
            return self.remove(group_id, member_id)
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    f"Expected share session epoch {session.epoch}, got {epoch}.")
        session.epoch = next_epoch(session.epoch)
        return None
