"""GroupConfig: the broker properties the group coordinator reads, with Kafka's names and defaults."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

# Kafka property name -> GroupConfig field. The new-member join timeout is internal in Kafka
# (GroupCoordinator.NewMemberJoinTimeoutMs); it is exposed here under the Java coordinator's name.
PROPERTY_NAMES = {
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
    "group.classic.new.member.join.timeout.ms": "new_member_join_timeout_ms",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.commit.timeout.ms": "offsets_commit_timeout_ms",
    "group.consumer.session.timeout.ms": "consumer_group_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "consumer_group_heartbeat_interval_ms",
    "group.consumer.max.size": "consumer_group_max_size",
    "group.consumer.assignors": "consumer_group_assignors",
    "group.consumer.migration.policy": "consumer_group_migration_policy",
    "group.consumer.regex.refresh.interval.ms": "consumer_group_regex_refresh_interval_ms",
    "group.share.session.timeout.ms": "share_group_session_timeout_ms",
    "group.share.heartbeat.interval.ms": "share_group_heartbeat_interval_ms",
    "group.share.max.size": "share_group_max_size",
}
# group.consumer.migration.policy (Kafka's ConsumerGroupMigrationPolicy): which online conversions of a
# non-empty group between the classic and the consumer protocol are allowed.
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass(frozen=True, slots=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2_147_483_647
    new_member_join_timeout_ms: int = 300_000
    offsets_topic_num_partitions: int = 50
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    offsets_commit_timeout_ms: int = 5000
    consumer_group_session_timeout_ms: int = 45_000     # KIP-848 consumer groups
    consumer_group_heartbeat_interval_ms: int = 5000
    consumer_group_max_size: int = 2_147_483_647
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    consumer_group_migration_policy: str = "bidirectional"  # Kafka 4's default
    # how old a group's regex resolutions may get before a heartbeat has them resolved again (Kafka's
    # GroupCoordinatorConfig.CONSUMER_GROUP_REGEX_REFRESH_INTERVAL_MS; its lower bound is the 10 s batch interval)
    consumer_group_regex_refresh_interval_ms: int = 600_000
    share_group_session_timeout_ms: int = 45_000        # KIP-932 share groups (Kafka's defaults)
    share_group_heartbeat_interval_ms: int = 5000
    share_group_max_size: int = 200

    @property
    def upgrade_enabled(self) -> bool:
        return self.consumer_group_migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.consumer_group_migration_policy in ("downgrade", "bidirectional")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> GroupConfig:
        """Build from Kafka property names; unrelated properties are ignored, values may be strings."""
        kwargs = {}
        for name, value in props.items():
            fld = PROPERTY_NAMES.get(name)
            if fld is None:
                continue
            if fld == "consumer_group_assignors":  # a list of names
                kwargs[fld] = tuple(value) if isinstance(value, (list, tuple)) else tuple(
                    v.strip() for v in str(value).split(",") if v.strip())
                continue
            if fld == "consumer_group_migration_policy":
                policy = str(value).strip().lower()
                if policy not in MIGRATION_POLICIES:
                    raise ValueError(f"{name} must be one of {', '.join(MIGRATION_POLICIES)}, got {value!r}")
                kwargs[fld] = policy
                continue
            try:
                kwargs[fld] = int(value)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be an integer, got {value!r}") from None
        return cls(**kwargs)

    def to_properties(self) -> dict[str, int]:
        fields = {f.name for f in dataclasses.fields(self)}
        return {name: getattr(self, fld) for name, fld in PROPERTY_NAMES.items() if fld in fields}
