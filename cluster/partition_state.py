"""The state of one partition as the cluster agrees on it: replicas, ISR, leader and the two epochs.

This is the value of the partition's key in the metadata store (`topics/<t>/p/<p>`), written only by
compare-and-set: by the controller for elections and reassignments, by the leader for its own ISR. Its
fields are those of KRaft's `PartitionRegistration` (metadata/.../metadata/PartitionRegistration.java)
and its JSON form uses the names of `PartitionRecord` as Kafka's JSON converters print them
(metadata/src/main/resources/common/metadata/PartitionRecord.json): `replicas`, `isr`,
`removingReplicas`, `addingReplicas`, `leader`, `leaderRecoveryState`, `leaderEpoch`, `partitionEpoch`.

Two epochs, as in Kafka:
- `leaderEpoch` grows by one each time the leader field is (re)written by a change: a new leader, no
  leader, or a reassignment that drops replicas (see kcoord.cluster.partition_change). Followers and
  clients send it on Fetch / ListOffsets / OffsetForLeaderEpoch; an older one is FENCED_LEADER_EPOCH.
- `partitionEpoch` grows by one on every change of any field. A leader's ISR change names the epoch it
  read; an older one is INVALID_UPDATE_VERSION. The store's own revision of the key is the CAS token;
  the two move together because every write of this value is a change that bumps `partitionEpoch`.

Not kept (yet): KIP-966's eligible leader replicas (`eligibleLeaderReplicas`, `lastKnownElr`; off by
default in Kafka 4.0) and KIP-858's log directories.
"""
from __future__ import annotations

import enum
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

NO_LEADER = -1


class LeaderRecoveryState(enum.IntEnum):
    """KRaft's `LeaderRecoveryState` (KIP-704), with its wire values."""

    RECOVERED = 0  # elected from the ISR, or recovered since an unclean election
    RECOVERING = 1  # elected uncleanly and still recovering: the ISR stays {leader} until it reports RECOVERED


# JSON names (Kafka's) -> attribute names; the order is the order of PartitionRecord's fields
_FIELDS = {
    "replicas": "replicas",
    "isr": "isr",
    "removingReplicas": "removing_replicas",
    "addingReplicas": "adding_replicas",
    "leader": "leader",
    "leaderRecoveryState": "leader_recovery_state",
    "leaderEpoch": "leader_epoch",
    "partitionEpoch": "partition_epoch",
}
# a tagged field in PartitionRecord (tag 0), so a value may leave it out; it then means RECOVERED
_OPTIONAL = {"leaderRecoveryState"}
_LISTS = {"replicas", "isr", "removingReplicas", "addingReplicas"}


class InvalidRegistration(ValueError):
    """A registration that breaks one of the invariants, or a stored value that is not one."""


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """One partition's agreed state. Immutable: a change is a new registration (see `changed`).

    Invariants (checked on construction, so a corrupt stored value is refused where it is read):
    replicas hold distinct non-negative broker ids, in preferred order (the first is the preferred
    leader); the ISR, the adding and the removing replicas are replicas, without duplicates; adding and
    removing are disjoint; the leader is NO_LEADER or a member of the ISR; epochs are >= 0.
    """

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("replicas", "isr", "adding_replicas", "removing_replicas"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "leader_recovery_state", LeaderRecoveryState(self.leader_recovery_state))
        problem = self._problem()
        if problem:
            raise InvalidRegistration(f"{problem}: {self}")

    def _problem(self) -> str | None:
        if _duplicated(self.replicas) or any(r < 0 for r in self.replicas):
            return "replicas must be distinct non-negative broker ids"
        members = set(self.replicas)
        for name in ("isr", "adding_replicas", "removing_replicas"):
            ids = getattr(self, name)
            if _duplicated(ids) or not members.issuperset(ids):
                return f"{name} must be distinct replicas"
        if set(self.adding_replicas) & set(self.removing_replicas):
            return "a replica cannot be both added and removed"
        if self.leader != NO_LEADER and self.leader not in self.isr:
            return "the leader must be in the ISR"
        if self.leader_epoch < 0 or self.partition_epoch < 0:
            return "epochs must not be negative"
        return None

    # -- what Kafka's PartitionRegistration answers --------------------------------------------------

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def preferred_replica(self) -> int:
        """The first assigned replica, or NO_LEADER for an empty assignment."""
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def has_preferred_leader(self) -> bool:
        """Led by its preferred replica; a partition that is not is "imbalanced" for auto leader rebalance."""
        return self.leader == self.preferred_replica

    @property
    def is_reassigning(self) -> bool:
        """A reassignment is in progress (PartitionReassignmentReplicas.isReassignmentInProgress)."""
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the ongoing reassignment: everything but the ones it adds."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    def changed(self, **fields: Any) -> PartitionRegistration:
        """A copy with `fields` replaced, epochs untouched (the change builder decides the epochs)."""
        return replace(self, **fields)

    # -- the stored value ---------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {key: _plain(getattr(self, attr)) for key, attr in _FIELDS.items()}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PartitionRegistration:
        """The registration a stored document describes. Every field but `leaderRecoveryState` is required
        and unknown fields are refused: a value from a newer writer is not silently cut down."""
        if not isinstance(doc, Mapping):
            raise InvalidRegistration(f"a partition registration is a JSON object, not {type(doc).__name__}")
        unknown = sorted(set(doc) - set(_FIELDS))
        if unknown:
            raise InvalidRegistration(f"unknown partition registration field(s) {unknown}")
        missing = sorted(set(_FIELDS) - set(doc) - _OPTIONAL)
        if missing:
            raise InvalidRegistration(f"partition registration lacks {missing}")
        values: dict[str, Any] = {}
        for key, attr in _FIELDS.items():
            if key not in doc:
                continue
            value = doc[key]
            if key in _LISTS:
                if not isinstance(value, list) or not all(_is_int(v) for v in value):
                    raise InvalidRegistration(f"{key} must be a list of broker ids, got {value!r}")
                values[attr] = tuple(value)
            elif not _is_int(value):
                raise InvalidRegistration(f"{key} must be an integer, got {value!r}")
            else:
                values[attr] = value
        state = values.get("leader_recovery_state", LeaderRecoveryState.RECOVERED)
        if state not in set(LeaderRecoveryState):
            raise InvalidRegistration(f"leaderRecoveryState {state} is neither 0 nor 1")
        return cls(**values)

    def encode(self) -> bytes:
        """The bytes stored under the partition's key (compact JSON, keys in PartitionRecord's order)."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> PartitionRegistration:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidRegistration(f"a partition registration is JSON: {exc}") from exc
        return cls.from_json(doc)


def initial_registration(replicas: Iterable[int], live_brokers: Collection[int]) -> PartitionRegistration:
    """A new partition's state, as CreateTopics / CreatePartitions write it: the ISR is the live replicas
    in assignment order, the first of them leads, both epochs start at 0
    (ReplicationControlManager.createTopic / createPartitions -> buildPartitionRegistration).
    The caller refuses an assignment with no live replica before (see replica_placement)."""
    replicas = tuple(replicas)
    isr = tuple(r for r in replicas if r in live_brokers)
    if not isr:
        raise InvalidRegistration(f"no replica of {list(replicas)} is live")
    return PartitionRegistration(replicas=replicas, isr=isr, leader=isr[0])


def _duplicated(ids: tuple[int, ...]) -> bool:
    return len(set(ids)) != len(ids)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, enum.IntEnum):
        return int(value)
    return value
