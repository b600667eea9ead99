"""The composition root: builds storage, the data plane, the group runtime, the server and metrics,
and runs them until SIGINT/SIGTERM.

Shutdown goes in stages (as hypercorn/aiohttp do): stop accepting, let queued and in-flight requests
finish up to a timeout, stop the group runtime, flush and fsync every partition, close.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.broker import registry
from kcoord.broker.client_telemetry import ClientTelemetry
from kcoord.broker.config import PROPERTIES, BrokerConfig, ConfigError
from kcoord.broker.connection_quotas import ConnectionQuotas
from kcoord.broker.controller_mutation_quota import ControllerMutationQuotaManager, MutationQuotaConfig
from kcoord.broker.coordinator_roles import CoordinatorRoles
from kcoord.broker.data.fetch_wait import FetchWaiters
from kcoord.broker.data.producers import ProducerStateManager
from kcoord.broker.data.txn_index import TxnIndex
from kcoord.broker.data.visibility import Visibility
from kcoord.broker.fault_injector import FaultInjector
from kcoord.broker.hooks import Hooks
from kcoord.broker.quota import ClientQuotaManager, QuotaConfig, quota_managers
from kcoord.broker.server import BoundListener, KafkaServer
from kcoord.broker.telemetry_export import TelemetryExport
from kcoord.metadata.client_metrics_configs import ClientMetricsConfigStore
from kcoord.metadata.client_quotas import ClientQuotaStore
from kcoord.metadata.dynamic_broker_configs import DynamicBrokerConfigs
from kcoord.metadata.features import FeatureStore
from kcoord.metadata.group_configs import GroupConfigStore
from kcoord.metadata.store import StoreError
from kcoord.metadata.topics import (
    CONSUMER_OFFSETS,
    TRANSACTION_STATE,
    TopicManager,
    consumer_offsets_configs,
    transaction_state_configs,
)
from kcoord.observability.metrics import Metrics, PrometheusEndpoint, StatsdPusher
from kcoord.protocol.headers import is_flexible

if TYPE_CHECKING:  # built in start() (imported there: storage and the coordinators load with the node)
    from kcoord.broker.admin_http import AdminEndpoint
    from kcoord.broker.cluster_configs import ClusterConfigResources
    from kcoord.broker.cluster_features import ClusterFeatures
    from kcoord.broker.cluster_quotas import ClusterClientQuotas
    from kcoord.broker.cluster_topic_configs import ClusterTopicConfigs
    from kcoord.broker.data.txn_verification import TxnVerifier
    from kcoord.broker.security.manager import Security
    from kcoord.broker.share.coordinator_service import ShareCoordinatorService
    from kcoord.broker.share.manager import SharePartitionManager
    from kcoord.cluster.node import ClusterNode
    from kcoord.coordinator.runtime import GroupRuntime
    from kcoord.storage import FS, LogConfig, LogManager, PartitionLog
    from kcoord.txn.runtime import TransactionRuntime

log = logging.getLogger("kcoord")

SHUTDOWN_TIMEOUT_S = 10.0
# Young-generation threshold of the cyclic GC for the serving process (CPython's default: 700). A
# request holds ~100 GC-tracked objects until it is answered (an OffsetCommit until its fsync), so
# under load the default runs a young collection every few requests, each re-walking every request
# in flight and promoting it to be walked again by the older generations. Measured in process with
# 100 committers of 50 offsets: 1.3-2.5 µs of CPU per committed offset in collections at the default.
# The young count is allocations minus frees, so under steady load it only drifts; what trips it is
# the objects of the requests in flight (~20,000 for those 100 commits). At 10,000 that still cost
# 0.6-1.1 µs per offset (a collection per ~200 commits, each walking them all); at 50,000, above
# what they hold, steady load ran without collections (measured in process: a Broker fed the frames).
# Garbage cycles wait longer; refcounting frees everything else at once, as before.
GC_YOUNG_THRESHOLD = 50_000


class Broker:
    """One kcoord node. `await start()`, then `await stop()`; `serve(config)` wraps both.

    The parts a request may use are declared here and built by `start()` before the port opens, so
    every handler finds them: none is Optional, and reading one before `start()` is an AttributeError,
    not a None to check. (stop() after a failed start closes the ones that were built.)
    """

    logs: LogManager                      # kcoord.storage: the partition logs
    topics: TopicManager
    dynamic_configs: DynamicBrokerConfigs  # BROKER config resource (KIP-226)
    group_configs: GroupConfigStore        # GROUP config resource; group_config(id)
    features: FeatureStore                 # finalized feature levels (KIP-584)
    client_metrics_configs: ClientMetricsConfigStore  # CLIENT_METRICS config resource (KIP-714 subscriptions)
    client_telemetry: ClientTelemetry      # client instances and the metrics they push (KIP-714)
    client_quotas: ClientQuotaStore        # Describe/AlterClientQuotas entities
    produce_quota: ClientQuotaManager      # producer_byte_rate enforcement (.active: any quota defined)
    fetch_quota: ClientQuotaManager        # consumer_byte_rate enforcement
    request_quota: ClientQuotaManager      # request_percentage enforcement (the server times requests)
    mutation_quota: ControllerMutationQuotaManager  # controller_mutation_rate (KIP-599): the mutation APIs charge it
    connection_quotas: ConnectionQuotas    # connection_creation_rate by ip and the max.connections* settings
    producers: ProducerStateManager
    group_coordinator: GroupRuntime        # the group coordinator (GroupCoordinatorService on asyncio)
    txn_coordinator: TransactionRuntime    # the transaction coordinator
    security: Security                     # listeners' TLS/SASL, SCRAM, ACLs (authorizer None when off)
    share_partitions: SharePartitionManager  # share groups' data plane: share-partitions, sessions (KIP-932)
    share_coordinator: ShareCoordinatorService | None  # cluster mode: __share_group_state's leader side

    def __init__(self, config: BrokerConfig, fs: FS | None = None) -> None:
        self.config = config
        self._fs = fs  # storage's file system; tests pass a kcoord.storage.FaultyFS to fail or hold fsyncs
        self.node_id: int = config.node_id
        self.log_dir: str = config.log_dirs[0]
        self.hooks = Hooks()
        self.metrics = Metrics()
        self.faults = FaultInjector(self.hooks, self.metrics)  # the admin endpoint's faults, as hooks
        self.cluster_id = ""
        self.fetch_waiters = FetchWaiters()
        self.visibility = Visibility(self.fetch_waiters, self.metrics)  # high watermark moves, long polls wake
        self.txn_index = TxnIndex()    # last stable offsets and aborted transactions per data partition
        self.server: KafkaServer | None = None
        self.listeners: list[BoundListener] = []
        self._prometheus: PrometheusEndpoint | None = None
        self._statsd: StatsdPusher | None = None
        self._admin: AdminEndpoint | None = None  # when kcoord.admin.listener is set
        self.telemetry_export: TelemetryExport | None = None  # pushed metrics to log.dirs, for analytics
        self._telemetry_writer: asyncio.Task[None] | None = None
        self.cluster: ClusterNode | None = None   # when kcoord.etcd.connect is set (kcoord.cluster.node)
        # cluster mode: KIP-890 verification of transactional writes by a coordinator on another node
        self.txn_verifier: TxnVerifier | None = None
        self.cluster_topic_configs: ClusterTopicConfigs | None = None  # cluster mode: topic configs' owner
        self.cluster_features: ClusterFeatures | None = None  # cluster mode: finalized features' writer
        self.cluster_broker_configs: ClusterConfigResources | None = None  # cluster mode: dynamic broker configs
        self.cluster_group_configs: ClusterConfigResources | None = None  # cluster mode: group configs
        self.cluster_client_metrics: ClusterConfigResources | None = None  # cluster mode: CLIENT_METRICS resources
        self.cluster_quotas: ClusterClientQuotas | None = None  # cluster mode: client quotas' writer
        # cluster mode: which coordinator partitions this node leads; coordinators register to follow them
        self.coordinator_roles = CoordinatorRoles()
        self.share_coordinator = None  # cluster mode: set by _start_share
        # called with a connection's id when it closes (Kafka's ConnectionDisconnectListener: share sessions)
        self.disconnect_listeners: list[Callable[[str], None]] = []
        self.stopping = False

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        from kcoord.storage import LogManager

        registry.load_all()
        is_flexible(0, 0)  # loads the header-version table now rather than during a client's first request
        os.makedirs(self.log_dir, exist_ok=True)
        self.cluster_id = load_or_create_cluster_id(self.log_dir, self.node_id)
        # Dynamic configs first: the logs open with the effective broker defaults.
        self.dynamic_configs = DynamicBrokerConfigs(  # cluster mode: the cluster's, followed as the node joins
            self.log_dir, self.config, self.node_id, PROPERTIES,
            read_file=self.config.get("kcoord.etcd.connect") is None)
        self.group_configs = GroupConfigStore(self.log_dir, self.config,
                                              read_file=self.config.get("kcoord.etcd.connect") is None)
        self.features = FeatureStore(self.log_dir, self.node_id)
        self._start_client_telemetry()
        self._start_quotas()
        # __consumer_offsets is opened compacted from the start: no maintenance pass may ever see it
        # under the delete policy (retention would drop coordinator state).
        self.logs = LogManager(self.log_dir, default_config=self.log_config(), fs=self._fs, topic_configs={
            CONSUMER_OFFSETS: self.log_config(consumer_offsets_configs(self.config)),
            TRANSACTION_STATE: self.log_config(transaction_state_configs(self.config))})
        self.topics = TopicManager(self)
        self.producers = ProducerStateManager(self.log_dir, self.logs)
        # Retention and compaction run in the background (Kafka's log cleaner / retention check).
        self.logs.start_maintenance(min(self.config.get("log.retention.check.interval.ms"),
                                        self.config.get("log.cleaner.backoff.ms")) / 1000.0)
        await self._start_groups()
        await self._start_transactions()
        self._start_share()
        from kcoord.broker.security.manager import Security

        self.security = Security(self.config, self.log_dir)  # ConfigError when a store cannot be read
        self.server = KafkaServer(
            self, max_request_bytes=self.config.get("socket.request.max.bytes"),
            idle_ms=self.config.get("connections.max.idle.ms"),
            high_water=max(2, self.config.get("queued.max.requests")),
            low_water=max(1, self.config.get("queued.max.requests") // 4))
        self.dynamic_configs.on_change = self.server.acceptors.limits_changed  # max.connections* are dynamic
        in_cluster = self.config.get("kcoord.etcd.connect") is not None
        # A cluster node binds its ports (it registers them) but accepts nothing until it has joined and
        # follows the cluster's metadata: until then it would answer from its single-node view, naming
        # itself leader of what it holds and acknowledging writes no leader accepted (Kafka's BrokerServer
        # likewise enables request processing only once it has caught up with the metadata).
        self.listeners = await self.server.start(self.config.listeners, serve=not in_cluster)
        if in_cluster:  # cluster mode: join once the ports are bound
            from kcoord.broker.cluster_node import open_cluster_node
            from kcoord.cluster.keys import Endpoint

            self.cluster = await open_cluster_node(self)
            await self.cluster.start([Endpoint(b.name, b.host, b.port) for b in self.advertised()],
                                     self.config.get("broker.rack"), self.topics.cordoned())
            self.cluster_id = self.cluster.cluster_id  # the cluster's (the first node's), not this data dir's
            await self.server.enable_request_processing()
        await self._start_metrics()
        await self._start_admin()
        log.info("kcoord node %d of cluster %s started; listeners %s", self.node_id, self.cluster_id,
                 ", ".join(f"{b.name}://{b.host}:{b.port}" for b in self.listeners))

    async def stop(self, timeout: float = SHUTDOWN_TIMEOUT_S) -> None:
        if self.stopping:
            return
        self.stopping = True
        if self.cluster is not None:  # controlled shutdown first: leaderships move while we still serve
            await self.cluster.shutdown()
        self.fetch_waiters.wake_all()  # long-polling fetches answer now with what they have
        # The coordinator goes first, as Kafka's does when it gives up its partitions: parked JoinGroup /
        # SyncGroup requests are answered NOT_COORDINATOR at once (clients look for the coordinator
        # again) instead of holding the connection drain below until its timeout.
        built = vars(self)  # after a failed start(), only what it got to build
        if "txn_coordinator" in built:  # markers still to write finish on the next load
            await self.txn_coordinator.close()
        if "group_coordinator" in built:
            await self.group_coordinator.close()
        if "share_partitions" in built:
            await self.share_partitions.close()
        if self.server is not None:
            await self.server.stop(timeout)
        await self.visibility.close()
        if self._telemetry_writer is not None and self.telemetry_export is not None:
            self._telemetry_writer.cancel()
            await self.telemetry_export.flush()   # what clients pushed until now, for the analytics
        if "logs" in built:
            await self.sync_all()
            await self.logs.close()
        if self._statsd is not None:
            await self._statsd.stop()
        if self._prometheus is not None:
            await self._prometheus.stop()
        if self._admin is not None:
            await self._admin.stop()

    async def sync_all(self) -> None:
        logs = self.logs.logs()
        results = await asyncio.gather(*(lg.sync() for lg in logs), return_exceptions=True)
        for lg, result in zip(logs, results, strict=True):
            if isinstance(result, Exception):
                log.error("fsync of %s failed at shutdown: %s", lg, result)

    def _start_client_telemetry(self) -> None:
        self.client_metrics_configs = ClientMetricsConfigStore(  # cluster mode: followed as the node joins
            self.log_dir, read_file=self.config.get("kcoord.etcd.connect") is None)
        self.client_telemetry = ClientTelemetry(
            lambda: int(time.monotonic() * 1000), self.client_metrics_configs.subscriptions,
            enabled=self.config.get("kcoord.client.telemetry.enable"),
            max_bytes=self.config.get("telemetry.max.bytes"),
            default_interval_ms=self.config.get("kcoord.client.telemetry.push.interval.ms"))
        self.client_metrics_configs.on_change = self.client_telemetry.subscriptions_changed
        self.metrics.collectors.append(self.client_telemetry.prometheus_lines)
        export_bytes = self.config.get("kcoord.client.telemetry.export.max.bytes")
        if export_bytes > 0:  # for the analytics report; receives only what the (enabled) receiver accepted
            self.telemetry_export = TelemetryExport(self.log_dir, export_bytes, lambda: int(time.time() * 1000))
            self.client_telemetry.on_receive = self.telemetry_export.received
            self.metrics.collectors.append(self.telemetry_export.prometheus_lines)
            self._telemetry_writer = asyncio.get_running_loop().create_task(self.telemetry_export.run())

    def _start_quotas(self) -> None:
        self.client_quotas = ClientQuotaStore(  # cluster mode: followed as the node joins
            self.log_dir, read_file=self.config.get("kcoord.etcd.connect") is None)
        self.produce_quota, self.fetch_quota, self.request_quota = quota_managers(
            lambda: int(time.monotonic() * 1000),
            QuotaConfig(self.config.get("quota.window.num"), self.config.get("quota.window.size.seconds") * 1000))
        self.mutation_quota = ControllerMutationQuotaManager(lambda: int(time.monotonic() * 1000), MutationQuotaConfig(
            self.config.get("controller.quota.window.num"), self.config.get("controller.quota.window.size.seconds") * 1000))
        self.connection_quotas = ConnectionQuotas(  # the acceptors apply it (broker/acceptor.py)
            lambda: int(time.monotonic() * 1000), self.config.get("quota.window.num"),
            self.config.get("quota.window.size.seconds") * 1000)

        def quotas_changed() -> None:
            quotas = self.client_quotas.quotas()
            self.produce_quota.update(quotas)
            self.fetch_quota.update(quotas)
            self.request_quota.update(quotas)
            self.mutation_quota.update(quotas)
            self.connection_quotas.update_ip_quotas(quotas)
            if self.server is not None:
                self.server.request_quota_changed()
                self.server.acceptors.limits_changed()

        self.client_quotas.on_change = quotas_changed
        quotas_changed()

    async def _start_groups(self) -> None:
        from kcoord.coordinator import runtime

        self.group_coordinator = await runtime.create(self)

    async def _start_transactions(self) -> None:
        from kcoord.broker.data.txn_markers import MarkerWriter
        from kcoord.txn.runtime import TransactionRuntime
        from kcoord.txn.state_manager import TxnConfig

        in_cluster = self.config.get("kcoord.etcd.connect") is not None
        self.txn_coordinator = TransactionRuntime(
            TxnConfig.from_properties(self.config.get), self.transaction_state_log, MarkerWriter(self),
            self.producers.allocate_id_or_error,
            lambda p: self.logs.get(TRANSACTION_STATE, p) if self.topics.get(TRANSACTION_STATE) else None,
            follow_leadership=in_cluster, replication=lambda: self.visibility.replication,
            transaction_version=lambda: self.features.level("transaction.version"))
        if in_cluster:  # the coordinator follows __transaction_state's leadership (issue #27)
            self.coordinator_roles.register(TRANSACTION_STATE, self.txn_coordinator)
        await self.txn_coordinator.start()

    def _start_share(self) -> None:
        from kcoord.broker.share.coordinator import SHARE_GROUP_STATE, ShareCoordinator
        from kcoord.broker.share.manager import SharePartitionManager

        self.share_partitions = SharePartitionManager(self, ShareCoordinator(self))
        if self.config.get("kcoord.etcd.connect") is not None:  # share state follows leadership (issue #28)
            from kcoord.broker.share.coordinator_service import ShareCoordinatorService
            from kcoord.broker.share.persister import ShareStatePersister

            self.share_coordinator = ShareCoordinatorService(self)
            self.coordinator_roles.register(SHARE_GROUP_STATE, self.share_coordinator)
            self.share_partitions.persister = ShareStatePersister(self, self.share_coordinator)
        self.share_partitions.start()

    def transaction_state_log(self, partition: int) -> PartitionLog:
        """The PartitionLog of `__transaction_state-<partition>`, creating the topic on first use."""
        self.topics.ensure_transaction_state()
        return self.logs.get_or_create(TRANSACTION_STATE, partition)

    async def _start_metrics(self) -> None:
        port = self.config.get("metrics.port")
        if port >= 0:
            self._prometheus = PrometheusEndpoint(self.metrics)
            bound = await self._prometheus.start(self.config.get("metrics.host"), port)
            log.info("metrics at http://%s:%d/metrics", self.config.get("metrics.host"), bound)
        address = self.config.get("metrics.statsd.address")
        if address:
            host, _, port_text = address.rpartition(":")
            self._statsd = StatsdPusher(self.metrics, host or "127.0.0.1", int(port_text),
                                        self.config.get("metrics.statsd.interval.ms") / 1000.0,
                                        self.config.get("metrics.statsd.prefix"))
            await self._statsd.start()

    async def _start_admin(self) -> None:
        url = self.config.get("kcoord.admin.listener")
        if url is not None:
            from kcoord.broker.admin_http import AdminEndpoint
            from kcoord.broker.config import admin_address

            host, port = admin_address(url)
            self._admin = AdminEndpoint(self)
            await self._admin.start(host, port)
            log.warning("admin endpoint (fault injection, timers; no authentication) at http://%s:%d",
                        host, self._admin.port)

    @property
    def admin_port(self) -> int | None:
        return self._admin.port if self._admin is not None else None

    # -- what handlers use --------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """host:port of the first listener, as bound."""
        first = self.listeners[0]
        return f"{first.host}:{first.port}"

    @property
    def metrics_port(self) -> int | None:
        return self._prometheus.port if self._prometheus is not None else None

    def advertised(self) -> list[BoundListener]:
        """advertised.listeners, with port 0 (or an unset advertised.listeners) meaning the bound port."""
        bound = {b.name: b for b in self.listeners}
        out = []
        for adv in self.config.advertised_listeners:
            real = bound.get(adv.name)
            host = adv.host
            if host in ("0.0.0.0", "::", ""):
                host = "127.0.0.1" if real is None or real.host in ("0.0.0.0", "::", "") else real.host
            port = adv.port if adv.port != 0 or real is None else real.port
            out.append(BoundListener(adv.name, host, port))
        return out

    def endpoint_for(self, listener: str) -> BoundListener:
        """The address to advertise to a client that came in on `listener`."""
        adv = self.advertised()
        for b in adv:
            if b.name == listener:
                return b
        return adv[0]

    def log_config(self, overrides: dict[str, Any] | None = None) -> LogConfig:
        from kcoord.metadata.topics import log_config_for

        return log_config_for(self.config, overrides or {})

    def consumer_offsets_log(self, partition: int) -> PartitionLog:
        """The PartitionLog of `__consumer_offsets-<partition>`, creating the topic on first use."""
        self.topics.ensure_consumer_offsets()
        return self.logs.get_or_create(CONSUMER_OFFSETS, partition)


def load_or_create_cluster_id(log_dir: str, node_id: int) -> str:
    """Read cluster.id from log.dirs/meta.properties, or make one and write it the way Kafka does."""
    path = os.path.join(log_dir, "meta.properties")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                key, sep, value = line.strip().partition("=")
                if sep and key.strip() == "cluster.id":
                    return value.strip()
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("#\n#kcoord\nversion=1\n")
        fh.write(f"cluster.id={cluster_id}\nnode.id={node_id}\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return cluster_id


async def _serve_async(config: BrokerConfig) -> int:
    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except (OSError, ConfigError, StoreError) as exc:  # StoreError: cluster mode, etcd not reachable
        log.error("cannot start: %s", exc)
        await broker.stop(timeout=1.0)
        return 1
    listening = ", ".join(f"{b.host}:{b.port}" for b in broker.listeners)
    extra = f"; metrics on port {broker.metrics_port}" if broker.metrics_port is not None else ""
    extra += f"; admin on port {broker.admin_port}" if broker.admin_port is not None else ""
    print(f"kcoord ready: listening on {listening}{extra}", flush=True)
    await stop.wait()
    log.info("shutting down (signal received)")
    await broker.stop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(sig)
    log.info("kcoord stopped")
    return 0


def serve(config: BrokerConfig) -> int:
    """Run a broker in the foreground on uvloop until SIGINT/SIGTERM; return the exit status."""
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    try:
        import uvloop
    except ImportError:  # uvloop is a dependency; fall back rather than refuse to run
        return asyncio.run(_serve_async(config))
    with contextlib.suppress(KeyboardInterrupt):
        return uvloop.run(_serve_async(config))
    sys.stderr.flush()
    return 0
