"""What every part of the coordinator shares: the one writer interface, the topic's name, and how an
append's error reaches the client (Kafka's CoordinatorOperationExceptionHelper)."""
from __future__ import annotations

from collections.abc import Callable

from kcoord.coordinator.common.runtime import APPEND_ERRORS
from kcoord.coordinator.records import Record
from kcoord.protocol.consumer_offsets import (
    OFFSETS_TOPIC as OFFSETS_TOPIC,  # re-exported: the coordinator's topic
)
from kcoord.protocol.errors import ErrorCode

LOGGER_NAME = "kcoord.coordinator"

# the coordinators' shared map (kcoord.coordinator.common.runtime), and what only the group coordinator maps
_WRITE_ERRORS = {
    **APPEND_ERRORS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
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
