"""A classic Heartbeat from a classic member of a consumer group waits for the group's write in flight, over the
wire: an in-process broker on a kcoord.storage.FaultyFS holds the fsync of a consumer-protocol member's join, and the
Heartbeat is answered only once that write is durable, from the state it made.

Kafka 4: GroupCoordinatorService.heartbeat schedules classicGroupHeartbeat as a write operation
(runtime.scheduleWriteOperation "classic-group-heartbeat"); GroupMetadataManager.classicGroupHeartbeatToConsumerGroup
returns a CoordinatorResult without records; CoordinatorRuntime (coordinator-common) completes a write operation
without records at once only when no write is pending, else once the pending writes are committed."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kcoord.broker.app import Broker
from kcoord.broker.config import BrokerConfig
from kcoord.protocol.client import KafkaWireClient
from kcoord.protocol.errors import ErrorCode as E
from kcoord.storage import FaultyFS
from kcoord.testkit.waiting import wait_until_async
from tests.broker.groups.group_server import GROUP_TEST_OVERRIDES
from tests.broker.groups.rawgroup import TOPIC
from tests.broker.groups.test_migration_admin_wire import join_consumer
from tests.broker.groups.test_migration_wire import classic_group, close
from tests.broker.test_data_plane import create
from tests.broker.test_high_watermark import hold_fsyncs
from tests.broker.test_lifecycle import BOUND_S
from tests.support.raw_kafka import RawKafka


@pytest.fixture
async def faulty_broker(tmp_path):
    """(broker, fs): in-process, on a FaultyFS whose fsyncs the test holds; the group tests' timeouts (an initial
    rebalance delay, so both raw members make the first generation)."""
    fs = FaultyFS()
    broker = Broker(BrokerConfig.load(overrides={"listeners": "PLAINTEXT://127.0.0.1:0",
                                                 "log.dirs": str(tmp_path / "data"), **GROUP_TEST_OVERRIDES}), fs=fs)
    await broker.start()
    yield broker, fs
    if fs.fsync_gate is not None:
        fs.fsync_gate.set()  # never leave storage threads parked
    await broker.stop(timeout=5.0)


@pytest.mark.parametrize("path", ["frame", "handler"])
async def test_classic_heartbeat_waits_for_the_groups_write(faulty_broker, path):
    """`frame`: the Heartbeat frame handler (a future of the response frame); `handler`: the general handler (a
    before-hook on Heartbeat makes the server use it), whose answer is then a coroutine."""
    broker, fs = faulty_broker
    port = broker.listeners[0].port
    if path == "handler":
        broker.hooks.before(12, lambda ctx, request: None)
    server = SimpleNamespace(bootstrap=f"127.0.0.1:{port}")
    await asyncio.wait_for(broker.group_coordinator.loaded_event.wait(), BOUND_S)  # raw joins do not retry LOAD_IN_PROGRESS
    with RawKafka(port) as c:
        await asyncio.to_thread(create, c, TOPIC, 4)
    members = await asyncio.to_thread(classic_group, server, "hb")
    try:
        def first_consumer():
            with KafkaWireClient.connect(server.bootstrap) as client:
                return join_consumer(client, "hb")

        await asyncio.to_thread(first_consumer)  # the upgrade: the classic members' epoch is behind the group's
        a = members[0]
        assert await asyncio.to_thread(a.heartbeat) == E.REBALANCE_IN_PROGRESS  # at once: nothing in flight
        shard = broker.group_coordinator.service.shard_for("hb")
        gate = hold_fsyncs(fs)
        joining = asyncio.create_task(asyncio.to_thread(first_consumer))  # a second one: its write is held
        await wait_until_async(lambda: shard.consumer_manager.busy("hb"), BOUND_S, "the heartbeat held")
        beat = asyncio.create_task(asyncio.to_thread(a.heartbeat))
        await asyncio.sleep(0.3)
        assert not beat.done() and not joining.done()  # neither is answered before the write is durable
        gate.set()
        assert await asyncio.wait_for(beat, BOUND_S) == E.REBALANCE_IN_PROGRESS
        await asyncio.wait_for(joining, BOUND_S)
    finally:
        await asyncio.to_thread(close, members)
