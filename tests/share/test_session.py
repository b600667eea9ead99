"""ShareSessionCache: share sessions' epochs and errors as Kafka's SharePartitionManager.newContext /
acknowledgeSessionUpdate and ShareRequestMetadata.nextEpoch give them (core/src/main/java/kafka/server/
share/SharePartitionManager.java, share/src/main/java/org/apache/kafka/server/share/session/
ShareSessionCache.java). Pure: no sockets, no clock."""
from __future__ import annotations

import uuid

import pytest

from kcoord.protocol.errors import ErrorCode as E
from kcoord.share.session import FINAL_EPOCH, INT32_MAX, ShareSessionCache, ShareSessionError, next_epoch

T = uuid.UUID(int=7)


def error_of(call) -> E:
    with pytest.raises(ShareSessionError) as info:
        call()
    return info.value.error


def test_next_epoch_wraps_to_one():
    assert (next_epoch(0), next_epoch(41), next_epoch(INT32_MAX), next_epoch(FINAL_EPOCH)) == (1, 42, 1, FINAL_EPOCH)


def test_initial_then_incremental_fetches():
    cache = ShareSessionCache(10)
    ctx = cache.fetch_context("g", "m", 0, [(T, 0), (T, 1)], [], False)
    assert (ctx.full, ctx.released, ctx.session.epoch, list(ctx.session.partitions)) == (True, None, 1, [(T, 0), (T, 1)])
    ctx = cache.fetch_context("g", "m", 1, [(T, 2)], [(T, 0)], True)
    assert (ctx.full, ctx.session.epoch, list(ctx.session.partitions)) == (False, 2, [(T, 1), (T, 2)])
    assert error_of(lambda: cache.fetch_context("g", "m", 1, [], [], False)) == E.INVALID_SHARE_SESSION_EPOCH
    assert error_of(lambda: cache.fetch_context("g", "other", 1, [], [], False)) == E.SHARE_SESSION_NOT_FOUND


def test_initial_fetch_replaces_the_old_session_and_refuses_acknowledgements():
    cache = ShareSessionCache(10)
    old = cache.fetch_context("g", "m", 0, [(T, 0)], [], False).session
    assert error_of(lambda: cache.fetch_context("g", "m", 0, [], [], True)) == E.INVALID_REQUEST
    ctx = cache.fetch_context("g", "m", 0, [(T, 1)], [], False)
    assert ctx.released is old and list(ctx.session.partitions) == [(T, 1)] and len(cache) == 1


def test_final_fetch_closes_and_may_not_fetch():
    cache = ShareSessionCache(10)
    session = cache.fetch_context("g", "m", 0, [(T, 0)], [], False).session
    assert error_of(lambda: cache.fetch_context("g", "m", FINAL_EPOCH, [(T, 0)], [], False)) == E.INVALID_REQUEST
    ctx = cache.fetch_context("g", "m", FINAL_EPOCH, [], [], True)
    assert (ctx.session, ctx.released, len(cache)) == (None, session, 0)
    assert error_of(lambda: cache.fetch_context("g", "m", FINAL_EPOCH, [], [], False)) == E.SHARE_SESSION_NOT_FOUND


def test_limit_reached_keeps_existing_sessions():
    cache = ShareSessionCache(1)
    cache.fetch_context("g", "a", 0, [], [], False)
    assert error_of(lambda: cache.fetch_context("g", "b", 0, [], [], False)) == E.SHARE_SESSION_LIMIT_REACHED
    assert cache.fetch_context("g", "a", 0, [], [], False).session is not None  # a's own replaces itself
    assert [s.member_id for s in cache.sessions()] == ["a"]


def test_acknowledge_epochs():
    cache = ShareSessionCache(10)
    assert error_of(lambda: cache.acknowledge_context("g", "m", 0)) == E.INVALID_SHARE_SESSION_EPOCH
    assert error_of(lambda: cache.acknowledge_context("g", "m", 1)) == E.SHARE_SESSION_NOT_FOUND
    cache.fetch_context("g", "m", 0, [(T, 0)], [], False)
    assert cache.acknowledge_context("g", "m", 1) is None and cache.get("g", "m").epoch == 2
    assert error_of(lambda: cache.acknowledge_context("g", "m", 1)) == E.INVALID_SHARE_SESSION_EPOCH
    closed = cache.acknowledge_context("g", "m", FINAL_EPOCH)
    assert closed is not None and closed.member_id == "m" and cache.get("g", "m") is None


def test_a_closed_connection_takes_its_sessions():
    """ShareSessionCache's ConnectionDisconnectListener: the sessions a connection opened go with it; a
    member that opened a newer session on another connection keeps that one."""
    cache = ShareSessionCache(10)
    cache.fetch_context("g", "a", 0, [], [], False, connection_id="c1")
    cache.fetch_context("g", "b", 0, [], [], False, connection_id="c1")
    cache.fetch_context("g", "b", 0, [], [], False, connection_id="c2")  # b moved to c2
    assert [s.member_id for s in cache.connection_closed("c1")] == ["a"]
    assert [s.member_id for s in cache.sessions()] == ["b"] and cache.connection_closed("c1") == []
    assert [s.member_id for s in cache.connection_closed("c2")] == ["b"] and len(cache) == 0
