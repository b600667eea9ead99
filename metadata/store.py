"""The metadata store: what the cluster keeps in etcd, seen through etcd v3's own model (issue #26).

One global revision counts every write; each key carries the revision that created it, the one that
last changed it, and how many times it was put since it was created (its version). A transaction is a
list of compares on those fields and two lists of operations, one for when every compare holds and
one for when any fails; all its writes land at one new revision. A lease keeps the keys put under it
alive while its holder keeps it alive, and deletes them when it expires. A watch replays every change
under a prefix from a revision on, in revision order, until the revision is compacted away.

That is all a controller election (create-if-absent under a lease; the creation revision is the
epoch), a broker registration, a partition-state compare-and-set (on its mod revision) and a node
following the metadata (snapshot at R, watch from R + 1) need. Keys are text relative to the store's
namespace (`brokers/ids/1`); values are bytes (callers encode JSON). Two implementations:
`kcoord.metadata.local_store.LocalStore` (in-process: single-node mode and unit tests) and
`kcoord.cluster.etcd_store.EtcdStore` (etcd through aetcd). tests/metadata/test_store_contract.py runs
the same tests against both.
"""
from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Literal, Protocol

CompareTarget = Literal["create", "mod", "version", "value"]
CompareOp = Literal["==", "!=", "<", ">"]


class StoreError(Exception):
    """Anything the store could not do; the subclasses are the cases a caller acts on."""


class Compacted(StoreError):
    """The revision asked for is older than the store's history: re-read a snapshot (range) and watch
    from its revision + 1."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"revision compacted: history starts at revision {compact_revision}")
        self.compact_revision = compact_revision


class LeaseNotFound(StoreError):
    """A put named a lease the store does not know (never granted, expired or revoked)."""

    def __init__(self, lease_id: int) -> None:
        super().__init__(f"lease {lease_id:#x} not found")
        self.lease_id = lease_id


class LeaseLost(StoreError):
    """keep_alive learned that its lease is gone (expired or revoked): every key under it is deleted,
    and whatever the lease stood for (a registration, a controllership) is over."""

    def __init__(self, lease_id: int) -> None:
        super().__init__(f"lease {lease_id:#x} is gone")
        self.lease_id = lease_id


class StoreUnavailable(StoreError):
    """The store did not answer (etcd unreachable, no quorum, timed out). Nothing is known to have
    changed; the caller may retry."""


@dataclasses.dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int  # the revision that created the key (a broker's or the controller's epoch)
    mod_revision: int     # the revision of its last change (a partition's epoch)
    version: int          # puts since it was created: 1 after the create
    lease: int = 0        # the lease it lives under; 0 = none


@dataclasses.dataclass(frozen=True, slots=True)
class RangeResult:
    revision: int              # the store revision the range was read at: watch from revision + 1
    kvs: tuple[KeyValue, ...]  # sorted by key


@dataclasses.dataclass(frozen=True, slots=True)
class Compare:
    """`target(key) op operand`. A key that does not exist compares as create = mod = version = 0,
    and every compare on its value fails (etcd's rule)."""
    key: str
    target: CompareTarget
    op: CompareOp
    operand: int | bytes


def absent(key: str) -> Compare:
    """Create-if-absent: the key does not exist now."""
    return Compare(key, "create", "==", 0)


def present(key: str) -> Compare:
    return Compare(key, "create", ">", 0)


def created_at(key: str, revision: int) -> Compare:
    """The key is the same incarnation (an epoch: the controller's, a broker's)."""
    return Compare(key, "create", "==", revision)


def modified_at(key: str, revision: int) -> Compare:
    """Nobody changed the key since it was read at `revision` (a partition's epoch)."""
    return Compare(key, "mod", "==", revision)


def unchanged_since(key: str, revision: int) -> Compare:
    """Nobody put the key after `revision` (a copy complete through `revision` still has its latest value;
    an absent key compares as mod 0, so this holds for it too)."""
    return Compare(key, "mod", "<", revision + 1)


@dataclasses.dataclass(frozen=True, slots=True)
class Put:
    key: str
    value: bytes
    lease: int = 0  # the key is deleted with this lease; 0 = none (a put without a lease detaches one)


@dataclasses.dataclass(frozen=True, slots=True)
class Delete:
    key: str
    prefix: bool = False  # every key starting with `key`


@dataclasses.dataclass(frozen=True, slots=True)
class Get:
    key: str
    prefix: bool = False


Op = Put | Delete | Get
# Per operation, in order: Get -> the keys it read (sorted), Delete -> how many keys it deleted, Put -> None.
OpResult = tuple[KeyValue, ...] | int | None


def check_branch(ops: Sequence[Op]) -> None:
    """etcd refuses a txn branch that writes one key twice ("duplicate key given in txn request")."""
    puts = [op.key for op in ops if isinstance(op, Put)]
    if len(set(puts)) != len(puts):
        raise ValueError("a txn branch puts one key twice")
    for op in ops:
        if isinstance(op, Delete) and any(k == op.key or (op.prefix and k.startswith(op.key)) for k in puts):
            raise ValueError(f"a txn branch both puts and deletes {op.key!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class TxnResult:
    succeeded: bool                 # every compare held, so on_success ran (else on_failure)
    revision: int                   # the store revision after the txn (its writes' mod_revision)
    responses: tuple[OpResult, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Lease:
    id: int
    ttl_s: int  # as granted (etcd raises a TTL below its floor, about 2 s with default timings)


@dataclasses.dataclass(frozen=True, slots=True)
class WatchEvent:
    type: Literal["put", "delete"]
    key: str
    value: bytes          # b"" for a delete
    create_revision: int  # 0 for a delete
    mod_revision: int     # the revision of this change
    version: int          # 0 for a delete
    prev: KeyValue | None  # the key before this change; None when it did not exist


class MetadataStore(Protocol):
    async def get(self, key: str) -> KeyValue | None: ...

    async def range(self, prefix: str) -> RangeResult:
        """Every key starting with `prefix` ("" = the whole namespace), read at one revision."""
        ...

    async def txn(self, compares: Sequence[Compare], on_success: Sequence[Op],
                  on_failure: Sequence[Op] = ()) -> TxnResult:
        """Atomically: if every compare holds run `on_success`, else `on_failure`. Writes to one key
        twice in a branch are refused (ValueError), as etcd refuses them; a put under an unknown lease
        raises LeaseNotFound and applies nothing."""
        ...

    async def grant_lease(self, ttl_s: int) -> Lease: ...

    async def keep_alive(self, lease_id: int) -> None:
        """Keep the lease alive until cancelled; run it as a task of its own. Raises LeaseLost as soon
        as the store says the lease is gone. An unreachable store is not a loss: it keeps trying
        (etcd does not expire leases while it has no quorum)."""
        ...

    async def revoke_lease(self, lease_id: int) -> None:
        """Delete the lease and its keys now (one revision). A lease already gone is not an error."""
        ...

    def watch(self, prefix: str, start_revision: int) -> AsyncIterator[list[WatchEvent]]:
        """Every change to keys starting with `prefix` from `start_revision` (>= 1) on: one list per
        revision (a txn's writes arrive together), in revision order, none skipped. Iterating raises
        Compacted if `start_revision` is older than the history kept. Close it with `aclose()`
        (contextlib.aclosing); to resume, watch again from the last revision seen + 1."""
        ...

    async def compact(self, revision: int) -> None:
        """Forget the history before `revision`: watching from an older revision raises Compacted."""
        ...

    async def close(self) -> None: ...
