"""A node of a cluster: what `Broker.start()` builds when `kcoord.etcd.connect` is set (issue #26).

Kafka 4's broker lifecycle (BrokerServer / BrokerLifecycleManager / BrokerMetadataPublisher) with the
ZooKeeper-era registration in etcd, in this order:

1. open the EtcdStore (the connect string's prefix namespaces the cluster) and make sure the cluster has
   an id (create-if-absent `cluster_id`: the first node's `meta.properties` id becomes the cluster's);
2. register `brokers/ids/<id>` under the node's lease (advertised listeners, `broker.rack`): the key's
   create_revision is the broker epoch (kcoord.cluster.registration);
3. follow the metadata (snapshot, then watch) into `image`; each batch's role changes are queued, never
   acted on in the listener, and a task of their own hands them to `replicas.apply(...)`;
4. run the controller candidacy under the same lease (kcoord.cluster.controller).

Lease lost (the node was paused or cut off past its session): every role is dropped at once
(`replicas.drop_all_roles()`: waiting acks=all writes fail, fetchers stop, the data stays), the node
registers again (new lease, new broker epoch), follows again every partition it holds and does not lead
(leaderships wait for the controller's next election), and a new controller candidacy starts under the
new lease, as ZooKeeper-era Kafka's processExpire re-registered.

Controlled shutdown (SIGTERM, `stop()`): mark the registration `shutting_down`; the controller moves
every leadership of this node away (or leaves a partition whose only ISR member it is leaderless); wait
until the image shows this node leading nothing, bounded by `shutdown_timeout_s`; then revoke the lease.

The seam with replication (`replicas`): an object with `apply(changes, image)`, `drop_all_roles()` and
`close()`. On a broker it is `BrokerReplicas`: the partition's topic is mirrored into the node's
TopicManager (the cluster's topic id and configs) and its local log opened with the topic's config, then
kcoord.cluster.replica_manager.ReplicaManager takes the role (fetchers, ISR, high watermark, acks=all).
Role changes, a lease loss's "drop every role" and the rejoin's "resume following" go through one queue,
so they are applied in the order they happened.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import struct
import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from kcoord.cluster import keys
from kcoord.cluster.controller import Controller, CreateTopicResult
from kcoord.cluster.keys import BrokerInfo, Endpoint
from kcoord.cluster.metadata_image import (
    BecomeFollower,
    BrokerImage,
    MetadataFollower,
    MetadataImage,
    RoleChange,
)
from kcoord.cluster.registration import BrokerRegistration
from kcoord.metadata.store import LeaseLost, MetadataStore, Put, StoreError, absent
from kcoord.protocol.errors import ErrorCode

log = logging.getLogger("kcoord.cluster.node")

DROP_ALL, RESUME = "drop all roles", "resume following"  # markers in the role queue
CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0  # bounded: SIGTERM exits even if leaderships cannot move
FORWARD_TIMEOUT_S = 5.0


class Replicas(Protocol):
    """What the node hands its role changes to (kcoord.cluster.replica_manager.ReplicaManager). `apply`
    runs on the node's role task, one call per metadata batch, in revision order; it must not block
    (schedule slow work on the partitions' owners)."""

    def apply(self, changes: list[RoleChange], image: MetadataImage) -> None: ...

    def drop_all_roles(self) -> None: ...

    async def close(self) -> None: ...


def held_roles(image: MetadataImage, node_id: int) -> list[RoleChange]:
    """BecomeFollower for every partition `node_id` holds and does not lead in `image`: what a node that
    dropped its roles (lease lost) follows again once registered anew. Partitions the image still says it
    leads are left to the controller, whose election (a new leader epoch) brings the next role."""
    return [BecomeFollower(tp, part.registration.leader, part.registration.leader_epoch)
            for tp, part in image.partitions()
            if node_id in part.registration.replicas and part.registration.leader != node_id]


class NodeConfig(Protocol):
    """What the node reads of the broker's configuration (kcoord.broker.config.BrokerConfig has it)."""

    node_id: int

    def get(self, key: str): ...


class ClusterNode:
    """One node's membership: registration, metadata follower, controller candidacy, role hand-off."""

    def __init__(self, config: NodeConfig, store: MetadataStore, replicas: Replicas, *,
                 local_cluster_id: str, shutdown_timeout_s: float = CONTROLLED_SHUTDOWN_TIMEOUT_S) -> None:
        self.config = config
        self.node_id: int = config.node_id
        self.store = store
        self.replicas = replicas
        self._local_cluster_id = local_cluster_id
        self._ttl_s = max(1, math.ceil(config.get("kcoord.etcd.session.timeout.ms") / 1000))
        self._shutdown_timeout_s = shutdown_timeout_s
        self.follower = MetadataFollower(store, self.node_id, self._on_metadata)
        # role batches in order; DROP_ALL (lease lost) and RESUME (registered again) among them
        self._roles: asyncio.Queue[tuple[list[RoleChange] | str, MetadataImage]] = asyncio.Queue()
        self.registration: BrokerRegistration | None = None
        self.controller: Controller | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False
        self.lease_losses = 0

    # -- what the serving path reads -----------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.follower.image

    @property
    def broker_epoch(self) -> int | None:
        return None if self.registration is None else self.registration.epoch

    @property
    def is_controller(self) -> bool:
        return self.controller is not None and self.controller.epoch is not None

    @property
    def controller_id(self) -> int:
        """The active controller's node id as this node's image has it; -1 while there is none."""
        current = self.image.controller
        return -1 if current is None else current.node_id

    @property
    def cluster_id(self) -> str:
        return self.image.cluster_id or self._local_cluster_id

    def live_brokers(self) -> list[BrokerImage]:
        return sorted(self.image.brokers.values(), key=lambda b: b.id)

    # -- lifecycle ------------------------------------------------------------------------------------

    async def start(self, listeners: Sequence[Endpoint], rack: str | None, cordoned: bool = False) -> None:
        await self.store.txn([absent(keys.CLUSTER_ID)], [Put(keys.CLUSTER_ID, self._local_cluster_id.encode())])
        info = BrokerInfo(self.node_id, tuple(listeners), rack, uuid.uuid4().hex, cordoned=cordoned)
        self.registration = BrokerRegistration(self.store, info, ttl_s=self._ttl_s, on_lost=self._lease_lost)
        epoch = await self.registration.register()
        self._spawn("roles", self._apply_roles())
        self._spawn("follower", self.follower.run())
        self._start_controller()
        await self.follower.wait_for(lambda image: self.node_id in image.brokers)
        log.info("node %d joined the cluster (broker epoch %d, lease TTL %d s)", self.node_id, epoch, self._ttl_s)

    def set_cordoned(self, cordoned: bool) -> None:
        """This node's log directory was cordoned or uncordoned (KIP-1066): its registration says so, for the
        controller's placement (a KRaft broker reports it in its heartbeat)."""
        if self.registration is not None and self.registration.info.cordoned != cordoned:
            self._spawn("cordoning", self.registration.update(cordoned=cordoned))

    def _spawn(self, name: str, coro) -> None:
        task = asyncio.create_task(coro, name=f"cluster node {self.node_id}: {name}")
        task.add_done_callback(self._task_done)
        self._tasks[name] = task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, LeaseLost):
            return  # the registration's on_lost does the rejoin
        if exc is not None and not self._stopping:
            log.error("%s ended: %r", task.get_name(), exc, exc_info=exc)

    def _start_controller(self) -> None:
        assert self.registration is not None and self.registration.lease_id is not None
        self.controller = Controller(self.store, self.node_id, self.registration.lease_id,
                                     unclean_leader_election_enable=self.config.get("unclean.leader.election.enable"))
        self._spawn("controller", self.controller.run())

    def _on_metadata(self, old: MetadataImage, new: MetadataImage, changes: list[RoleChange]) -> None:
        if changes:
            self._roles.put_nowait((changes, new))  # the listener must not block: the role task applies

    async def _apply_roles(self) -> None:
        while True:
            changes, image = await self._roles.get()
            try:
                if changes == DROP_ALL:
                    self.replicas.drop_all_roles()
                    continue
                if changes == RESUME:  # the image as it is now, not as it was when queued
                    image = self.image
                    changes = held_roles(image, self.node_id)
                assert not isinstance(changes, str)
                self.replicas.apply(changes, image)
            except Exception:  # a bug in one batch must not stop every later role change
                log.exception("node %d: applying role change(s) %s failed", self.node_id, changes)

    def _lease_lost(self, epoch: int) -> None:
        if self._stopping:
            return
        self.lease_losses += 1
        self._spawn("rejoin", self._rejoin(epoch))

    async def _rejoin(self, epoch: int) -> None:
        """Every leadership ends now; then a new registration and a new controller candidacy."""
        log.warning("node %d lost its lease (broker epoch %d): stepping down from every leadership",
                    self.node_id, epoch)
        await self._cancel("controller")
        self._roles.put_nowait((DROP_ALL, self.image))  # after the batches already queued, before later ones
        assert self.registration is not None
        while not self._stopping:
            try:
                new_epoch = await self.registration.register()
            except (LeaseLost, StoreError) as exc:
                log.warning("node %d: registering again failed (%s); retrying", self.node_id, exc)
                await asyncio.sleep(0.5)
                continue
            log.info("node %d registered again with broker epoch %d", self.node_id, new_epoch)
            self._roles.put_nowait((RESUME, self.image))
            self._start_controller()
            return

    async def _cancel(self, name: str) -> None:
        task = self._tasks.pop(name, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def shutdown(self) -> None:
        """Controlled shutdown, bounded in time, then leave the cluster and close the store."""
        if self._stopping:
            return
        self._stopping = True
        registration = self.registration
        try:
            if registration is not None and await registration.shutting_down():
                try:
                    await asyncio.wait_for(self.follower.wait_for(lambda image: not image.led_by(self.node_id)),
                                           self._shutdown_timeout_s)
                    log.info("node %d leads nothing any more", self.node_id)
                except TimeoutError:
                    log.warning("node %d: leaderships did not move within %.0f s; leaving anyway",
                                self.node_id, self._shutdown_timeout_s)
        except StoreError as exc:
            log.warning("node %d: controlled shutdown failed (%s); leaving anyway", self.node_id, exc)
        for name in ("rejoin", "controller", "follower", "roles"):
            await self._cancel(name)
        if registration is not None:
            await registration.close()
        await self.replicas.close()
        await self.store.close()

    # -- admin operations -------------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, str] | None = None,
                           assignments: Mapping[int, Sequence[int]] | None = None) -> CreateTopicResult:
        """On the active controller, create the topic; elsewhere NOT_CONTROLLER (a CreateTopics request is
        the client's to send to the controller, as with ZooKeeper-era Kafka)."""
        if self.controller is None or not self.is_controller:
            return CreateTopicResult(ErrorCode.NOT_CONTROLLER, f"node {self.node_id} is not the controller")
        return await self.controller.create_topic(name, partitions, replication_factor, configs, assignments)

    async def create_topics(self, topics: Sequence[tuple[str, int, int, Mapping[str, str]]]
                            ) -> dict[str, CreateTopicResult]:
        """Auto-creation (Metadata, FindCoordinator's internal topics): on the controller itself, or
        forwarded to it as a CreateTopics request (Kafka's AutoTopicCreationManager forwards to the
        controller). NOT_CONTROLLER while no controller is known."""
        if self.is_controller:
            return {name: await self.create_topic(name, n, rf, configs) for name, n, rf, configs in topics}
        controller = self.image.brokers.get(self.controller_id)
        if controller is None or not controller.info.listeners:
            return {name: CreateTopicResult(ErrorCode.NOT_CONTROLLER, "no controller") for name, *_ in topics}
        endpoint = controller.info.listeners[0]
        try:
            return await asyncio.wait_for(_forward_create_topics(endpoint.host, endpoint.port, topics),
                                          FORWARD_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError) as exc:
            log.info("node %d: forwarding CreateTopics to controller %d failed: %s",
                     self.node_id, controller.id, exc)
            return {name: CreateTopicResult(ErrorCode.NOT_CONTROLLER, str(exc)) for name, *_ in topics}

    # -- the controller's admin operations (ElectLeaders, reassignments, DeleteTopics, CreatePartitions) ---

    @property
    def active_controller(self) -> Controller | None:
        """This node's controller while it is the active one, else None: the handlers of the controller's
        admin APIs answer NOT_CONTROLLER then, and clients retry on the controller Metadata names."""
        return self.controller if self.is_controller else None


_SIZE = struct.Struct(">i")
_CREATE_TOPICS_KEY, _CREATE_TOPICS_VERSION = 19, 5


async def _forward_create_topics(host: str, port: int, topics: Sequence[tuple[str, int, int, Mapping[str, str]]]
                                 ) -> dict[str, CreateTopicResult]:
    """One CreateTopics v5 on a connection of its own to the controller's first listener."""
    from kcoord.protocol import messages as m
    from kcoord.protocol.headers import decode_response_header, encode_request_frame

    R = m.CreateTopicsRequest
    request = R(topics=[R.CreatableTopic(name=name, num_partitions=n, replication_factor=rf, assignments=[],
                                         configs=[R.CreatableTopicConfig(name=k, value=v)
                                                  for k, v in configs.items()])
                        for name, n, rf, configs in topics], timeout_ms=int(FORWARD_TIMEOUT_S * 1000),
                validate_only=False)
    body = m.request_codec(_CREATE_TOPICS_KEY, _CREATE_TOPICS_VERSION).encode(request)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(encode_request_frame(_CREATE_TOPICS_KEY, _CREATE_TOPICS_VERSION, 1, "kcoord-forward", body))
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        frame = await reader.readexactly(size)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    _correlation, offset = decode_response_header(frame, _CREATE_TOPICS_KEY, _CREATE_TOPICS_VERSION)
    response, _end = m.response_codec(_CREATE_TOPICS_KEY, _CREATE_TOPICS_VERSION).decode(frame, offset)
    return {t.name: CreateTopicResult(ErrorCode(t.error_code), t.error_message) for t in response.topics}


def has_topic(image: MetadataImage, name: str) -> bool:
    """Whether `image` has `name` with every partition (a just-created topic reached this node)."""
    topic = image.topics.get(name)
    return topic is not None and topic.info is not None and len(topic.partitions) == len(topic.info.replicas)
