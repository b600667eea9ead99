"""Cluster mode's topic configs: changed through any node, seen by every node (issue #26).

A topic's configs at creation are in its `topics/<t>` value, which only the controller writes. A change
(IncrementalAlterConfigs / AlterConfigs on a TOPIC) goes to a key of its own, as ZooKeeper-era Kafka
kept `/config/topics/<t>` apart from `/brokers/topics/<t>` (AdminZkClient.changeTopicConfig):

| key                   | value                                                 |
|-----------------------|-------------------------------------------------------|
| `config/topics/<t>`   | {"topic_id": the topic's id, "configs": {name: value}} |

written only if nobody changed it since the copy the change was computed from (`PrefixFollower.write_on_copy`),
so two concurrent changes cannot lose one another. It
holds the topic's whole set of overrides and wins over the creation-time ones while its topic id is the
topic's (a topic deleted and created again under the same name starts from its own configs). Every node
follows the prefix; on a change, each topic this node has is mirrored again with its effective configs
and its open logs take the new LogConfig (retention and compaction act on it from their next pass).
"""
from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kcoord.cluster.keys import TOPIC_CONFIGS, TopicInfo, topic_configs_key
from kcoord.metadata.prefix_follower import PrefixFollower
from kcoord.metadata.store import MetadataStore, Put

if TYPE_CHECKING:
    from kcoord.broker.app import Broker
    from kcoord.cluster.metadata_image import MetadataImage

log = logging.getLogger("kcoord.cluster.configs")

PREFIX = TOPIC_CONFIGS


class ClusterTopicConfigs:
    def __init__(self, store: MetadataStore, broker: Broker) -> None:
        self._broker = broker
        self._overrides: dict[str, tuple[uuid.UUID, dict[str, str]]] = {}
        self.follower = PrefixFollower(store, PREFIX, self._on_change)

    async def start(self) -> None:
        await self.follower.start()

    async def close(self) -> None:
        await self.follower.close()

    def effective(self, name: str, info: TopicInfo) -> dict[str, str]:
        """The topic's configs: the changed set if one was made for this topic id, else the creation's."""
        changed = self._overrides.get(name)
        return dict(changed[1]) if changed is not None and changed[0] == info.topic_id else dict(info.configs)

    def current(self, name: str) -> dict[str, str] | None:
        """The topic's configs as the cluster has them (None: no such topic in this node's metadata)."""
        image = self._image()
        topic = None if image is None else image.topics.get(name)
        if topic is None or topic.info is None:
            return None
        return self.effective(name, topic.info)

    async def alter(self, name: str, configs: Mapping[str, str]) -> bool:
        """Replace the topic's configs (validated by the caller, computed from this node's copy). False: the topic
        is gone. StaleCopy: another node changed them first (compute again)."""
        image = self._image()
        topic = None if image is None else image.topics.get(name)
        if topic is None or topic.info is None:
            return False
        value = json.dumps({"topic_id": str(topic.info.topic_id), "configs": dict(sorted(configs.items()))},
                           separators=(",", ":")).encode()
        key = topic_configs_key(name)
        await self.follower.write_on_copy(key[len(PREFIX):], Put(key, value))
        return True

    def _image(self) -> MetadataImage | None:
        node = self._broker.cluster
        return None if node is None else node.image

    def _on_change(self, values: Mapping[str, bytes]) -> None:
        overrides: dict[str, tuple[uuid.UUID, dict[str, str]]] = {}
        for name, value in values.items():
            try:
                doc = json.loads(value)
                overrides[name] = (uuid.UUID(doc["topic_id"]), {str(k): str(v) for k, v in doc["configs"].items()})
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                log.error("ignoring the bad value of %s%s: %s", PREFIX, name, exc)
        self._overrides = overrides
        self.refresh()

    def refresh(self) -> None:
        """Mirror every topic this node has with its effective configs; its open logs take them."""
        image = self._image()
        if image is None:
            return
        topics, logs = self._broker.topics, self._broker.logs
        for name, topic in image.topics.items():
            local = topics.get(name)
            if local is None or topic.info is None or local.topic_id != topic.info.topic_id:
                continue
            configs = self.effective(name, topic.info)
            if local.configs == configs:
                continue
            local = topics.mirror(name, topic.info.topic_id, len(topic.info.replicas), configs)
            config = topics.log_config_of(local)
            for partition in range(local.partitions):
                plog = logs.get(name, partition)
                if plog is not None:
                    plog.config = config
            log.info("topic %s configs now %s", name, configs)
