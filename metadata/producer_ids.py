"""Producer ids: blocks handed out so that no two producers ever get the same id (issue #26).

Kafka's design: the controller keeps one fact, the next unallocated producer id (KRaft's
ProducerIdsRecord; ZooKeeper-era `/latest_producer_id_block`), and each broker claims blocks of 1000
from it; a broker uses ids from its current block, asks for the next block when 90% of the current one
is used, and answers InitProducerId with COORDINATOR_LOAD_IN_PROGRESS while it has no id to give
(RPCProducerIdManager.generateProducerId). Here:

- single-node mode (`FileProducerIds`): the block end is written to `<log.dirs>/kcoord-producer-ids.json`
  and fsynced before an id from the block is used, so no id is reused after a restart;
- cluster mode (`StoreProducerIds`): the `producer_id_block` key of the metadata store holds the next block's
  start; a node claims a block by compare-and-set on the key's mod revision (`claim_block`), so two nodes
  never hold overlapping blocks. `ProducerIdBlocks` is the pure part (current and prefetched block, when
  to ask), the store I/O runs in one task at a time.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from typing import Protocol

from kcoord.metadata.store import MetadataStore, Put, StoreError, absent, modified_at

log = logging.getLogger("kcoord.producer_ids")

BLOCK_SIZE = 1000           # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
PREFETCH_FRACTION = 0.9     # RPCProducerIdManager.PID_PREFETCH_THRESHOLD
ID_FILE = "kcoord-producer-ids.json"
PRODUCER_IDS_KEY = "producer_id_block"  # relative to the cluster's prefix, beside kcoord.cluster.keys' keys
RETRY_BACKOFF_S = 0.1


class ProducerIdsUnavailable(Exception):
    """No producer id can be handed out now (no block claimed yet): answer COORDINATOR_LOAD_IN_PROGRESS,
    which clients retry."""


class ProducerIdSource(Protocol):
    def generate(self) -> int:
        """A producer id never handed out before; ProducerIdsUnavailable when there is none yet."""
        ...

    def was_allocated(self, producer_id: int) -> bool:
        """Whether `producer_id` may have been handed out (InitProducerId v3+ with an id: KIP-360)."""
        ...


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Ids [first, first + size) belong to `broker_id`."""

    broker_id: int
    first: int
    size: int = BLOCK_SIZE

    @property
    def end(self) -> int:
        return self.first + self.size


class FileProducerIds:
    """Single-node mode: one block at a time, its end durable in a file before any of its ids is used."""

    def __init__(self, log_dir: str) -> None:
        self._path = os.path.join(log_dir, ID_FILE)
        self._next_id = self._block_end = 0
        if os.path.exists(self._path):
            with open(self._path, encoding="utf-8") as fh:
                self._next_id = self._block_end = int(json.load(fh)["next_block_start"])

    def generate(self) -> int:
        if self._next_id >= self._block_end:
            self._block_end = self._next_id + BLOCK_SIZE
            tmp = self._path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"next_block_start": self._block_end}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._path)
        pid = self._next_id
        self._next_id += 1
        return pid

    def was_allocated(self, producer_id: int) -> bool:
        return producer_id < self._block_end


class ProducerIdBlocks:
    """The pure part of cluster mode's allocation: the block in use and at most one prefetched block."""

    def __init__(self, prefetch_fraction: float = PREFETCH_FRACTION) -> None:
        self._prefetch_fraction = prefetch_fraction
        self.current: ProducerIdBlock | None = None
        self.next_block: ProducerIdBlock | None = None
        self._next_id = 0

    def generate(self) -> int | None:
        """The next id, or None while no block is available (the caller asks for one: `wants_block`)."""
        if self.current is None or self._next_id >= self.current.end:
            self.current, self.next_block = self.next_block, None
            if self.current is None:
                return None
            self._next_id = self.current.first
        pid = self._next_id
        self._next_id += 1
        return pid

    def wants_block(self) -> bool:
        """True when there is no prefetched block and the current one is missing or 90% used."""
        if self.next_block is not None:
            return False
        if self.current is None:
            return True
        used = self._next_id - self.current.first
        return used >= self.current.size * self._prefetch_fraction

    def on_block(self, block: ProducerIdBlock) -> None:
        if self.current is None or self._next_id >= self.current.end:
            self.current, self._next_id = block, block.first
        else:
            self.next_block = block


def encode_next_block(broker_id: int, next_producer_id: int) -> bytes:
    return json.dumps({"next": next_producer_id, "broker_id": broker_id},
                      separators=(",", ":")).encode()


def decode_next_block(data: bytes) -> int:
    try:
        doc = json.loads(data)
        value = doc["next"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"bad {PRODUCER_IDS_KEY} value {data!r}: {exc}") from exc
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"bad {PRODUCER_IDS_KEY} value {data!r}")
    return value


async def claim_block(store: MetadataStore, broker_id: int, size: int = BLOCK_SIZE) -> ProducerIdBlock:
    """Claim the next block: read the key, write its start + size on the condition that nobody wrote it
    since (its mod revision), again on a lost race. StoreError when the store does not answer."""
    while True:
        kv = await store.get(PRODUCER_IDS_KEY)
        first = 0 if kv is None else decode_next_block(kv.value)
        compare = absent(PRODUCER_IDS_KEY) if kv is None else modified_at(PRODUCER_IDS_KEY, kv.mod_revision)
        result = await store.txn([compare], [Put(PRODUCER_IDS_KEY, encode_next_block(broker_id, first + size))])
        if result.succeeded:
            return ProducerIdBlock(broker_id, first, size)


class StoreProducerIds:
    """Cluster mode: ids from blocks claimed in the metadata store; one claiming task at a time, started
    by `generate` when a block is wanted, retrying (with a backoff) while the store does not answer."""

    def __init__(self, store: MetadataStore, broker_id: int, *, size: int = BLOCK_SIZE,
                 retry_backoff_s: float = RETRY_BACKOFF_S) -> None:
        self._store = store
        self._broker_id = broker_id
        self._size = size
        self._retry_backoff_s = retry_backoff_s
        self.blocks = ProducerIdBlocks()
        self._claiming: asyncio.Task[None] | None = None

    def generate(self) -> int:
        pid = self.blocks.generate()
        self._maybe_claim()
        if pid is None:
            raise ProducerIdsUnavailable("no producer id block claimed yet")
        return pid

    def was_allocated(self, producer_id: int) -> bool:
        # Another node may have handed out any id of a block claimed after ours: only the key knows.
        # Accept every non-negative id, as Kafka's coordinator accepts an idempotent producer's.
        return producer_id >= 0

    def prefetch(self) -> None:
        """Start claiming the first block now (as the node joins: its first InitProducerId need not wait)."""
        self._maybe_claim()

    async def close(self) -> None:
        if self._claiming is not None:
            self._claiming.cancel()
            await asyncio.gather(self._claiming, return_exceptions=True)

    def _maybe_claim(self) -> None:
        if self.blocks.wants_block() and (self._claiming is None or self._claiming.done()):
            self._claiming = asyncio.get_running_loop().create_task(self._claim(), name="producer-id-block")

    async def _claim(self) -> None:
        while self.blocks.wants_block():
            try:
                block = await claim_block(self._store, self._broker_id, self._size)
            except (StoreError, ValueError) as exc:
                log.warning("claiming a producer id block failed (retrying): %s", exc)
                await asyncio.sleep(self._retry_backoff_s)
                continue
            log.info("node %d claimed producer ids [%d, %d)", self._broker_id, block.first, block.end)
            self.blocks.on_block(block)
