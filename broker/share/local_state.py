"""The share-state RPCs on a single node (no `__share_group_state` leadership to follow): this node is the
share coordinator of every key and serves every share-partition itself, so the RPCs act on the
SharePartitionManager's share-partitions and their durable state (kcoord.broker.share.coordinator's log),
with ShareCoordinatorShard's checks. The same five calls as the cluster's ShareCoordinatorService.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kcoord.broker.share.coordinator import ShareKey
from kcoord.protocol.errors import ErrorCode
from kcoord.share import records as r
from kcoord.share.state import DurableShareState

if TYPE_CHECKING:
    from kcoord.broker.share.manager import SharePartitionManager

Answer = tuple[ErrorCode, str | None]


class LocalShareState:
    def __init__(self, manager: SharePartitionManager) -> None:
        self.manager = manager

    def _state(self, key: ShareKey) -> DurableShareState | None:
        sp = self.manager.get(*key)
        return None if sp is None else sp.durable

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> Answer:
        state = self._state(key)
        if state is not None and state_epoch <= state.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH, "The state epoch is not newer than the current one."
        return await self.manager.reset(*key, start_offset, state_epoch), None

    async def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, str | None, DurableShareState | None]:
        state = self._state(key)
        if state is not None and leader_epoch < state.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch is older than the recorded one.", None
        return ErrorCode.NONE, None, state

    async def write(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Sequence[r.StateBatch], delivery_complete_count: int) -> Answer:
        return await self.manager.write_state(key, state_epoch, leader_epoch, start_offset, batches,
                                              delivery_complete_count)

    async def delete(self, key: ShareKey) -> Answer:
        return await self.manager.delete(*key), None

    def summary(self, key: ShareKey) -> tuple[ErrorCode, DurableShareState | None]:
        return ErrorCode.NONE, self._state(key)
