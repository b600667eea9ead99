"""The serving path's side of cluster mode (issue #26): a ClusterNode over this broker's parts.

kcoord.cluster knows nothing of the broker; here its ReplicaManager gets the broker's logs and long-poll
waiters, and role changes reach the broker's TopicManager and producer state before the manager acts.
Built by Broker.start() only when kcoord.etcd.connect is set; it also swaps in the cluster's producer-id
blocks (kcoord.metadata.producer_ids) and follows the cluster's ACLs and SCRAM credentials
(kcoord.broker.security.cluster_security), configs, client quotas (kcoord.broker.cluster_quotas) and
CLIENT_METRICS subscriptions before the node joins.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from kcoord.cluster.metadata_image import MetadataImage, RoleChange, StopReplica, TopicPartition
from kcoord.cluster.node import ClusterNode

if TYPE_CHECKING:
    from kcoord.broker.app import Broker
    from kcoord.broker.cluster_topic_configs import ClusterTopicConfigs
    from kcoord.cluster.replica_manager import ReplicaManager


class ClusterStatePart(Protocol):
    """A follower (or writer) of cluster-wide state that the node closes as it leaves."""

    async def close(self) -> None: ...


class BrokerReplicas:
    """The broker's side of role changes around the ReplicaManager: before it takes a role, the topic is
    mirrored into the node's TopicManager with the cluster's topic id and configs (what produce, fetch and
    ListOffsets look topics up in), the partition's log opened with that topic's config, and the
    partition's producer state and transaction index dropped (rebuilt from the log when next needed). It
    closes the node's followers of cluster-wide state (`parts`) with the replicas, before the store closes."""

    def __init__(self, broker: Broker, manager: ReplicaManager, topic_configs: ClusterTopicConfigs,
                 parts: Sequence[ClusterStatePart]) -> None:
        self._broker = broker
        self.manager = manager
        self._topic_configs = topic_configs
        self._parts = parts

    def apply(self, changes: list[RoleChange], image: MetadataImage) -> None:
        for change in changes:
            # idempotence state is rebuilt from the log by the next leader: as a follower this node
            # appended and truncated without it
            self._broker.producers.forget_partition((change.tp.topic, change.tp.partition))
            self._broker.txn_index.forget_partition((change.tp.topic, change.tp.partition))  # open transactions too
            if not isinstance(change, StopReplica):
                self._open(change.tp, image)
        self.manager.apply(changes, image)
        # coordinators load / unload after the partition's replication took the role (their writes wait on it)
        self._broker.coordinator_roles.apply(changes)

    def drop_all_roles(self) -> None:
        self.manager.drop_all_roles()
        self._broker.coordinator_roles.resign_all()

    def _open(self, tp: TopicPartition, image: MetadataImage) -> None:
        topic = image.topics.get(tp.topic)
        if topic is None or topic.info is None:
            return
        local = self._broker.topics.mirror(tp.topic, topic.info.topic_id, len(topic.info.replicas),
                                           self._topic_configs.effective(tp.topic, topic.info))
        self._broker.logs.get_or_create(tp.topic, tp.partition,
                                        config=self._broker.topics.log_config_of(local))

    async def close(self) -> None:
        for part in self._parts:
            await part.close()
        await self.manager.close()


async def open_cluster_node(broker: Broker) -> ClusterNode:
    """The store and the replicas (a ReplicaManager over the broker's logs) for `broker`; nothing runs
    until `start()`. The handlers find the ReplicaManager at `broker.visibility.replication`."""
    from kcoord.broker.cluster_configs import BROKERS, CLIENT_METRICS, GROUPS, ClusterConfigResources
    from kcoord.broker.cluster_features import ClusterFeatures
    from kcoord.broker.cluster_quotas import ClusterClientQuotas
    from kcoord.broker.cluster_topic_configs import ClusterTopicConfigs
    from kcoord.broker.data.txn_verification import TxnVerifier
    from kcoord.broker.security.cluster_security import ClusterSecurity
    from kcoord.cluster.etcd_store import EtcdStore
    from kcoord.cluster.replica_manager import ReplicaManager, ReplicationConfig, tcp_endpoint
    from kcoord.metadata.producer_ids import StoreProducerIds

    connect = broker.config.get("kcoord.etcd.connect")
    store = await EtcdStore.open(connect)
    node: ClusterNode | None = None

    def image() -> MetadataImage:
        assert node is not None
        return node.image

    manager = ReplicaManager(broker.node_id, broker.logs, store, ReplicationConfig.from_mapping(broker.config.props),
                             lambda: int(time.time() * 1000), image,
                             on_high_watermark=broker.fetch_waiters.notify,
                             # replication connects from this node's listener host (testkit/links.py tells nodes apart by it)
                             endpoint_factory=lambda leader, images: tcp_endpoint(leader, images, broker.listeners[0].host))
    # producer ids from the cluster's blocks, never from this node's file (two nodes would share ids)
    producer_ids = StoreProducerIds(store, broker.node_id)
    broker.producers.use_ids(producer_ids)
    producer_ids.prefetch()
    # ACLs and SCRAM credentials are the cluster's: followed before the node joins (and serves as a member)
    security = broker.security.cluster = ClusterSecurity(store, broker.security.authorizer, broker.security.scram)
    await security.start()
    # topic configs changed through any node (config/topics/<t>), followed here
    topic_configs = broker.cluster_topic_configs = ClusterTopicConfigs(store, broker)
    await topic_configs.start()
    def features_changed() -> None:  # cordoned.log.dirs has effect from metadata.version 4.3-IV0 only
        if broker.cluster is not None:
            broker.cluster.set_cordoned(broker.topics.cordoned())

    # finalized levels: the cluster's
    features = broker.cluster_features = ClusterFeatures(store, broker.features, features_changed)
    await features.start()
    # dynamic broker configs (topics without an override follow a change) and group configs
    def broker_configs_changed(layers: dict[str, dict[str, str]]) -> None:
        if broker.dynamic_configs.replace_layers(layers):
            broker.topics.refresh_log_configs()
            if broker.cluster is not None:  # cordoned.log.dirs may have changed (a joining node passes its own)
                broker.cluster.set_cordoned(broker.topics.cordoned())

    broker_configs = broker.cluster_broker_configs = ClusterConfigResources(store, BROKERS, broker_configs_changed)
    await broker_configs.start()
    group_configs = broker.cluster_group_configs = ClusterConfigResources(store, GROUPS,
                                                                          broker.group_configs.replace_all)
    await group_configs.start()
    # client quotas (every node's quota managers) and CLIENT_METRICS subscriptions (its telemetry)
    quotas = broker.cluster_quotas = ClusterClientQuotas(store, broker.client_quotas)
    await quotas.start()
    client_metrics = broker.cluster_client_metrics = ClusterConfigResources(
        store, CLIENT_METRICS, broker.client_metrics_configs.replace_all)
    await client_metrics.start()
    replicas = BrokerReplicas(broker, manager, topic_configs, [client_metrics, quotas, group_configs, broker_configs,
                                                               features, topic_configs, security, producer_ids])
    node = ClusterNode(broker.config, store, replicas, local_cluster_id=broker.cluster_id)
    broker.visibility.replication = manager
    broker.txn_verifier = TxnVerifier(broker.node_id, image, broker.config.get("transaction.state.log.num.partitions"),
                                      broker.listeners[0].host)
    return node
