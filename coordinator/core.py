"""CoordinatorCore: the groups map, partition ownership and loading state, and the front-door checks."""
from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Hashable

from coordinator.config import GroupConfig
from coordinator.group_metadata import GroupMetadata
from coordinator.group_state import GroupState
from coordinator.purgatory import JoinPurgatory
from coordinator.records import Record
from coordinator.timers import Clock, Timer, TimerQueue
from protocol.consumer_offsets import partition_for
from protocol.errors import ErrorCode

LOGGER_NAME = "kcoord.coordinator"
OFFSETS_TOPIC = "__consumer_offsets"

# Append errors -> what the client is told (Kafka's CoordinatorOperationExceptionHelper).
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


def map_write_error(error: ErrorCode) -> ErrorCode:
    return _WRITE_ERRORS.get(error, error)


class RecordWriter:
    """The one writer interface: append records to `__consumer_offsets-<partition>` and call back
    with ErrorCode.NONE once they are durable (or with the append error)."""

    def append(self, partition: int, records: list[Record], callback: Callable[[ErrorCode], None]) -> None:
        raise NotImplementedError


class CoordinatorCore:
    def __init__(self, config: GroupConfig | None = None, *, clock: Clock, timer: Timer | None = None,
                 writer: RecordWriter, log: logging.Logger | None = None,
                 owned_partitions: set[int] | None = None) -> None:
        self.config = config or GroupConfig()
        self.clock = clock
        self.timer = timer if timer is not None else TimerQueue(clock)
        self.writer = writer
        self.log = log or logging.getLogger(LOGGER_NAME)
        self.groups: dict[str, GroupMetadata] = {}
        self.join_purgatory = JoinPurgatory(self.timer)
        self.active = True
        # None = this node owns every partition (single node); else the set it leads.
        self.owned_partitions = owned_partitions
        self.loading_partitions: set[int] = set()
        self._append_seq = itertools.count()
        self._partition_cache: dict[str, int] = {}

    # ------------------------------------------------------------ routing

    def partition_for(self, group_id: str) -> int:
        p = self._partition_cache.get(group_id)
        if p is None:
            if len(self._partition_cache) > 100_000:
                self._partition_cache.clear()
            p = self._partition_cache[group_id] = partition_for(group_id, self.config.offsets_topic_num_partitions)
        return p

    def topic_partition_name(self, group_id: str) -> str:
        return f"{OFFSETS_TOPIC}-{self.partition_for(group_id)}"

    def is_group_local(self, group_id: str) -> bool:
        return self.owned_partitions is None or self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return bool(self.loading_partitions) and self.partition_for(group_id) in self.loading_partitions

    def validate_group_status(self, group_id: str | None, require_non_empty: bool = True) -> ErrorCode | None:
        """The front door: a usable group id, an active coordinator, and this node owning the group."""
        if group_id is None or (require_non_empty and group_id == ""):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.is_group_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.is_group_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    # ------------------------------------------------------------ groups

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def get_or_maybe_create_group(self, group_id: str, create_if_not_exist: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create_if_not_exist:
            group = GroupMetadata(group_id, self.now_ms())
            self.groups[group_id] = group
        return group

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def schedule(self, key: Hashable, delay_ms: int, callback: Callable[[], None]) -> None:
        self.timer.schedule(key, delay_ms, callback)

    def group_if_current(self, group: GroupMetadata) -> bool:
        """Timers hold the group object; it is only acted on if it is still the one registered."""
        return self.groups.get(group.group_id) is group and not group.is_(GroupState.DEAD)

    def append_records(self, group_id: str, records: list[Record],
                       callback: Callable[[ErrorCode], None]) -> None:
        """Append through the writer; `callback` runs exactly once: with the writer's answer, or with
        REQUEST_TIMED_OUT if none came within offsets.commit.timeout.ms (Kafka's append timeout)."""
        key = ("append", next(self._append_seq))
        done = False

        def finish(error: ErrorCode) -> None:
            nonlocal done
            if done:
                return  # a late answer after the timeout (or a second one) changes nothing
            done = True
            self.timer.cancel(key)
            callback(error)

        def timed_out() -> None:
            if not done:
                self.log.warning("Append of %d records for group %s timed out after %d ms", len(records), group_id,
                                 self.config.offsets_commit_timeout_ms)
            finish(ErrorCode.REQUEST_TIMED_OUT)

        self.schedule(key, self.config.offsets_commit_timeout_ms, timed_out)
        self.writer.append(self.partition_for(group_id), records, finish)
