"""Feature versions (KIP-584): what kcoord supports and the finalized levels, kept durably in
log.dirs/kcoord-features.json, as ApiVersions v3+ reports them and UpdateFeatures changes them.

What kcoord supports, and why (Kafka 4.2's server-common MetadataVersion and *Version enums are the scale):
  metadata.version 29-30   IBP_4_2_IV1 and IBP_4_3_IV0 (Kafka 4.3's latest production level, finalized by
                           default): kcoord advertises 4.3's API ranges (kafka-python infers 4.3 from
                           DescribeLogDirs 5). Level 30 turns on log directory cordoning (KIP-1066,
                           `cordoned.log.dirs`: kcoord.metadata.cordoned_log_dirs). It serves no behaviour
                           older than 4.2, so no lower level is supported. 30 changed the metadata format
                           (IBP_4_3_IV0's didMetadataChange), so 30 -> 29 is refused, safe or unsafe, as
                           FeatureControlManager refuses a downgrade across a metadata change.
  group.version    0-1     GV_1 (finalized by default) is the KIP-848 consumer protocol; at level 0
                           ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION, as
                           KafkaApis.isConsumerGroupProtocolEnabled makes them (`consumer_protocol_enabled`).
  transaction.version 0-2 TV_2 (finalized by default, as Kafka 4.x formats a new cluster: TransactionVersion
                           LATEST_PRODUCTION) is KIP-890 part 2. The level is what clients read to choose
                           their path (Java's TransactionManager.isTransactionV2Enabled: EndTxn v5, Produce
                           v12 and TxnOffsetCommit v5 adding implicitly); the broker, as Kafka's, follows
                           the request's version. On the coordinator it sets the __transaction_state value
                           version (0 at TV_0, 1 with tagged fields from TV_1) and the version of the
                           coordinator's own aborts. UpdateFeatures can set 0 or 1.
  share.version    0-1     SV_1 is KIP-932's share groups; its bootstrap metadata version is IBP_4_2_IV0, so a
                           new 4.2 cluster (metadata.version 29) finalizes it at 1 by default. At level 0 the
                           share-group APIs answer UNSUPPORTED_VERSION (KafkaApis.isShareGroupProtocolEnabled;
                           broker/apis/share_version_gate.py). A data dir whose features file predates it
                           reads it as 0, as an upgraded Kafka cluster keeps share groups off until enabled.
Not listed (Kafka lists no feature whose highest supported level is 0: BrokerFeatures.defaultSupportedFeatures):
  streams.version          streams groups are not served.
  kraft.version, eligible.leader.replicas.version   no KRaft quorum, no ELR.
A feature missing from SUPPORTED is Kafka's DISABLED range 0-0 (QuorumFeatures.localSupportedFeature).

The finalized levels and their epoch live here and nowhere else; the epoch (Kafka's is the metadata offset
of the last change) starts at 0 and rises by one on every change of a level.
"""
from __future__ import annotations

import enum
import logging
import os
from dataclasses import dataclass

from kcoord.metadata.json_file import read_json, write_json_atomically
from kcoord.protocol.errors import ErrorCode

log = logging.getLogger("kcoord.features")

FEATURES_FILE = "kcoord-features.json"
METADATA_VERSION = "metadata.version"
GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
SHARE_VERSION = "share.version"
# metadata.version levels kcoord knows by name (server-common MetadataVersion)
IBP_4_2_IV1 = 29
IBP_4_3_IV0 = 30  # KIP-1066 cordoned log directories; changed the metadata format
# The levels above which a downgrade would cross a metadata format change (MetadataVersion.didMetadataChange).
_METADATA_CHANGED = frozenset({IBP_4_3_IV0})

# name -> (min, max) of the levels kcoord serves; only features with max > 0.
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (29, 30),  # IBP_4_2_IV1, IBP_4_3_IV0
    GROUP_VERSION: (0, 1),       # GV_0 (classic groups only), GV_1 (KIP-848)
    TRANSACTION_VERSION: (0, 2),  # TV_0, TV_1 (flexible log values), TV_2 (KIP-890 part 2)
    SHARE_VERSION: (0, 1),       # SV_0 (no share groups), SV_1 (KIP-932)
}
# A new cluster's finalized levels: each supported feature at its highest level, as Kafka bootstraps a
# new cluster at the release's defaults.
DEFAULT_LEVELS: dict[str, int] = {name: high for name, (_, high) in SUPPORTED.items()}
DISABLED = (0, 0)


class UpgradeType(enum.IntEnum):
    """FeatureUpdate.UpgradeType: UpdateFeatures v1+'s UpgradeType field (v0: AllowDowngrade true = SAFE)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def of(cls, code: int) -> UpgradeType:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: UpgradeType


@dataclass(frozen=True, slots=True)
class UpdateResult:
    error: ErrorCode
    message: str | None = None


class FeatureStore:
    """The one owner of the finalized feature levels and their epoch, durable before a change is answered."""

    def __init__(self, log_dir: str, node_id: int) -> None:
        self._path = os.path.join(log_dir, FEATURES_FILE)
        self._node_id = node_id
        doc = read_json(self._path, None)
        if doc is None:
            self._levels, self._epoch = dict(DEFAULT_LEVELS), 0
        else:
            self._levels = {name: int(level) for name, level in doc["levels"].items()}
            self._epoch = int(doc["epoch"])
        self._derive()

    def _derive(self) -> None:
        # read by every ConsumerGroupHeartbeat (its frame path too): a plain attribute, kept with the levels
        self.consumer_protocol = self.consumer_protocol_enabled()
        self.share_groups = self.level(SHARE_VERSION) >= 1  # ShareVersion.supportsShareGroups

    @property
    def epoch(self) -> int:
        return self._epoch

    def supported(self) -> dict[str, tuple[int, int]]:
        return dict(SUPPORTED)

    def finalized(self) -> dict[str, int]:
        """Finalized levels above 0 (a level-0 feature is not finalized: Kafka removes it)."""
        return {name: level for name, level in self._levels.items() if level > 0}

    def level(self, name: str) -> int:
        return self._levels.get(name, 0)

    def consumer_protocol_enabled(self) -> bool:
        """group.version >= 1 (GroupVersion.isConsumerRebalanceProtocolSupported)."""
        return self.level(GROUP_VERSION) >= 1

    def update(self, updates: list[FeatureUpdate], validate_only: bool) -> UpdateResult:
        """Kafka's FeatureControlManager.updateFeatures: every update is checked in order and the first
        refusal refuses the whole request (QuorumController.updateFeatures prefixes its message); else all
        are applied at once, unless `validate_only`."""
        planned = self.plan(updates)
        if isinstance(planned, UpdateResult) or validate_only:
            return planned if isinstance(planned, UpdateResult) else UpdateResult(ErrorCode.NONE)
        if planned != self._levels:
            self.replace(planned, self._epoch + 1)
            write_json_atomically(self._path, {"version": 1, "epoch": self._epoch, "levels": self._levels})
        return UpdateResult(ErrorCode.NONE)

    def plan(self, updates: list[FeatureUpdate]) -> dict[str, int] | UpdateResult:
        """The finalized levels after `updates` (pure), or the refusal of the whole request."""
        for u in updates:
            reason = self._refusal(u)
            if reason is not None:
                message = f"Invalid update version {u.level} for feature {u.name}. {reason}"
                log.warning("update of features refused: %s", message)
                return UpdateResult(ErrorCode.INVALID_UPDATE_VERSION,
                                    "The update failed for all features since the following feature had an "
                                    f"error: {message}")
        levels = dict(self._levels)
        for u in updates:
            if u.level == 0:
                levels.pop(u.name, None)
            else:
                levels[u.name] = u.level
        return levels

    def replace(self, levels: dict[str, int], epoch: int) -> None:
        """Take these levels and epoch (an update here, or cluster mode: the cluster's, followed from the
        metadata store by kcoord.broker.cluster_features; nothing written here)."""
        if (levels, epoch) == (self._levels, self._epoch):
            return
        self._levels, self._epoch = dict(levels), epoch
        self._derive()
        log.info("features now %s (epoch %d)", self.finalized(), self._epoch)

    def levels(self) -> dict[str, int]:
        return dict(self._levels)

    def _refusal(self, u: FeatureUpdate) -> str | None:
        """Why Kafka's FeatureControlManager.updateFeature refuses `u` (all INVALID_UPDATE_VERSION), or None."""
        if u.upgrade_type == UpgradeType.UNKNOWN:
            return "The upgrade type is not one this controller knows."
        if u.level < 0:
            return "A feature version cannot be below 0."
        low, high = SUPPORTED.get(u.name, DISABLED)
        if not low <= u.level <= high:  # QuorumFeatures.reasonNotSupported
            if high == 0:
                return f"Local controller {self._node_id} does not support this feature."
            return f"Local controller {self._node_id} only supports versions {low}-{high}"
        current = self.level(u.name)
        if u.level < current and u.upgrade_type == UpgradeType.UPGRADE:
            return "A downgrade needs the upgrade type SAFE_DOWNGRADE or UNSAFE_DOWNGRADE."
        if u.level > current and u.upgrade_type != UpgradeType.UPGRADE:
            return "A downgrade cannot go to a newer version."
        if u.name == METADATA_VERSION and u.level < current and any(
                u.level < changed <= current for changed in _METADATA_CHANGED):
            # FeatureControlManager.updateMetadataVersion (MetadataVersion.checkIfMetadataChanged)
            if u.upgrade_type == UpgradeType.SAFE_DOWNGRADE:
                return "Refusing to perform the requested downgrade because it might delete metadata information."
            return "Unsafe metadata downgrade is not supported in this version."
        return None

    def cordoning_supported(self) -> bool:
        """metadata.version >= 4.3-IV0: below it Kafka ignores cordoned.log.dirs and refuses to set it
        dynamically (KIP-1066; core's CordonedLogDirsIntegrationTest.testFeatureNotEnabled)."""
        return self.level(METADATA_VERSION) >= IBP_4_3_IV0
