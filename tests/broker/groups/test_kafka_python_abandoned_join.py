"""The e2e benchmark's "one kafka-python consumer stuck rebalancing" is kafka-python's own bug, not a
coordinator answer: pinned here deterministically over TCP.

A leader whose rejoin was asked for by kafka-python's metadata check (it first assigned before it
knew the topic) copies the metadata snapshot while it computes the new assignment; if its poll()
returns before the SyncGroup answer arrives, need_rejoin() is already false, so no later poll
collects the finished join: the consumer stays REBALANCING and sends nothing. The coordinator
answers every request as Kafka does and, as Kafka does, expires the silent member after its
session timeout. bench.e2e.abandoned_join recognises the state so the benchmark reports it as the
client's.
"""
from __future__ import annotations

import asyncio
import threading

from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic

from bench.e2e import abandoned_join
from kcoord.broker.app import Broker
from kcoord.coordinator.group_state import GroupState
from kcoord.protocol.errors import ErrorCode
from kcoord.testkit.waiting import wait_until_async
from kcoord.tools.groups_cli import assigned_partitions

TOPIC, GROUP = "created-after-join", "abandoned-join"
SESSION_MS = 6000  # group.min.session.timeout.ms's default
SYNC_DELAY_S = 0.3  # far longer than the 20 ms poll: the join finishes while no poll waits for it


def _group(coordinator):
    """The group's object, once its shard is loaded (None before)."""
    shard = coordinator.shard_for(GROUP)
    return None if isinstance(shard, ErrorCode) else shard.group_manager.get_group(GROUP)


async def test_kafka_python_leader_abandons_a_join_whose_sync_outlasts_its_poll(kcoord_broker: Broker):
    port = kcoord_broker.listeners[0].port
    coordinator = kcoord_broker.group_coordinator.service

    topic_created = False

    async def slow_sync(ctx, request):
        if topic_created:  # the metadata-triggered rejoin's SyncGroup (and any later one)
            await asyncio.sleep(SYNC_DELAY_S)

    kcoord_broker.hooks.before(14, slow_sync)
    # Some kafka-python metadata requests ask for auto-creation whatever allow_auto_create_topics
    # says; the topic must appear only when the test creates it.
    kcoord_broker.config.props["auto.create.topics.enable"] = False
    # Built in a thread: its constructor bootstraps synchronously against this loop's broker.
    consumer = await asyncio.to_thread(
        KafkaConsumer, TOPIC, bootstrap_servers=f"127.0.0.1:{port}", group_id=GROUP,
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=100, enable_auto_commit=False,
        allow_auto_create_topics=False, client_id="abandoned-join")
    stop = threading.Event()

    def poll_loop():  # the bench's loop: short polls, as an application with other work does
        while not stop.is_set():
            consumer.poll(timeout_ms=20)

    poller = threading.Thread(target=poll_loop, daemon=True)
    poller.start()
    try:
        # kafka-python may rejoin once or twice on its own first; any Stable generation will do.
        group = await wait_until_async(lambda: (g := _group(coordinator)) and g.is_(GroupState.STABLE) and g,
                                10, "a Stable group (the topic does not exist yet: empty assignment)")
        member_id = group.all_members()[0]

        def create_topic():
            admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", client_id="abandoned-join-admin")
            try:
                admin.create_topics([NewTopic(TOPIC, 2, 1)])
            finally:
                admin.close()

        topic_created = True
        await asyncio.to_thread(create_topic)
        stuck_in = await wait_until_async(lambda: abandoned_join(consumer), 15, "the client to abandon its join")
        # The coordinator completed that generation normally: assignment stored, group Stable.
        assert group.is_(GroupState.STABLE) and group.generation_id == stuck_in and group.has(member_id)
        assert sorted(assigned_partitions(group.get(member_id).assignment)) == [(TOPIC, 0), (TOPIC, 1)]
        # The client never heartbeats again; Kafka's coordinator expires such a member, and so do we.
        await wait_until_async(lambda: group.is_(GroupState.EMPTY), SESSION_MS / 1000 + 5, "session expiry")
        assert abandoned_join(consumer) == stuck_in, "still stuck: it sends nothing the broker could answer"
        assert consumer.assignment() == set(), "it never applied the assignment it was sent"
    finally:
        stop.set()
        await asyncio.to_thread(poller.join, 10)
        await asyncio.to_thread(consumer.close)
