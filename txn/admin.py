"""What admin tools read of the transaction coordinator: ListTransactions and DescribeTransactions
(TransactionStateManager.listTransactionStates, TransactionCoordinator.handleDescribeTransactions)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from kcoord.protocol.errors import ErrorCode
from kcoord.txn.metadata import TransactionMetadata, TxnState
from kcoord.txn.state_manager import TransactionStateManager

_BY_NAME = {s.kafka_name: s for s in TxnState}


@dataclass(frozen=True, slots=True)
class Listed:
    error: ErrorCode
    unknown_state_filters: list[str]
    transactions: list[TransactionMetadata]


def list_transactions(state: TransactionStateManager, producer_ids: set[int], state_names: list[str],
                      duration_ms: int, now_ms: int, id_pattern: str | None = None) -> Listed:
    """Every transactional id matching the filters; Dead ones never; COORDINATOR_LOAD_IN_PROGRESS while any
    partition loads. A duration filter keeps transactions that started more than duration_ms ago; an id
    pattern (KIP-1152; null or "" for none) the ids it matches whole, as Java's Matcher.matches does, and
    INVALID_REGULAR_EXPRESSION when it does not compile."""
    if state.loading:
        return Listed(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], [])
    try:
        pattern = re.compile(id_pattern) if id_pattern else None
    except re.error:
        return Listed(ErrorCode.INVALID_REGULAR_EXPRESSION, [], [])
    unknown = [name for name in state_names if name not in _BY_NAME]
    wanted = {_BY_NAME[name] for name in state_names if name in _BY_NAME}

    def include(md: TransactionMetadata) -> bool:
        return (md.state != TxnState.DEAD
                and (not producer_ids or md.producer_id in producer_ids)
                and (not state_names or md.state in wanted)
                and not (duration_ms >= 0 and now_ms - md.start_ms <= duration_ms)
                and (pattern is None or pattern.fullmatch(md.transactional_id) is not None))

    return Listed(ErrorCode.NONE, unknown, [md for md in state.all() if include(md)])
