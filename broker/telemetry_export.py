"""The export of pushed client telemetry (KIP-714) to the data dir, for the analytics pipeline.

Kafka gives every accepted push to a ClientTelemetryReceiver plugin, which exports it elsewhere; this is
kcoord's analogue: each push kcoord's receiver decoded (broker/client_telemetry.py) becomes one JSON line
(protocol/telemetry_export.py says the format) in a rolled, size-capped set of files under
`<log.dirs>/kcoord-client-telemetry/`.

Off the request path: the push handler only appends to a bounded queue (`offer`); a background task
writes what is queued every FLUSH_INTERVAL_S in a worker thread. No fsync: telemetry is not an
acknowledged write, so a crash may lose the queue and the tail the page cache had not written (at most
about a flush interval of pushes), never anything else. When the queue is full (the disk is slower than
the clients) the newest pushes are dropped and counted. Nothing is written while telemetry is off: only
pushes the receiver accepted reach `offer`.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable

from kcoord.broker.client_telemetry import ClientInstance
from kcoord.observability.metrics import prometheus_family
from kcoord.protocol.otlp import MetricsData
from kcoord.protocol.telemetry_export import EXPORT_DIR, file_name, file_seq, push_record

log = logging.getLogger("kcoord.telemetry")

FLUSH_INTERVAL_S = 1.0
MAX_QUEUED = 10_000          # pushes waiting for the writer
FILES = 4                    # the cap is split over this many files; the oldest is deleted on a roll


class RollingJsonLines:
    """Appends lines to `<dir>/<seq>.jsonl`, rolling to a new file at max_bytes / FILES and deleting the
    oldest files beyond FILES. Blocking I/O: called from a worker thread, one call at a time."""

    def __init__(self, directory: str, max_bytes: int) -> None:
        self.directory = directory
        self.file_bytes = max(1, max_bytes // FILES)
        self._seq: int | None = None   # the file being written; a new one per broker start
        self._size = 0

    def _files(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(s for s in map(file_seq, names) if s is not None)

    def _roll(self) -> None:
        existing = self._files()
        self._seq = (existing[-1] + 1) if existing else 0
        self._size = 0
        for old in existing[:max(0, len(existing) + 1 - FILES)]:
            try:
                os.remove(os.path.join(self.directory, file_name(old)))
            except FileNotFoundError:
                pass

    def write(self, lines: list[str]) -> None:
        os.makedirs(self.directory, exist_ok=True)
        if self._seq is None:
            self._roll()
        i = 0
        while i < len(lines):
            if self._size >= self.file_bytes:
                self._roll()
            start = i
            while i < len(lines) and (self._size < self.file_bytes or i == start):
                self._size += len(lines[i].encode("utf-8"))
                i += 1
            assert self._seq is not None
            with open(os.path.join(self.directory, file_name(self._seq)), "a", encoding="utf-8") as fh:
                fh.writelines(lines[start:i])


class TelemetryExport:
    """The queue between the push handler and the writer; `run` is the writer task, `close` writes the rest."""

    def __init__(self, log_dir: str, max_bytes: int, wall_clock_ms: Callable[[], int]) -> None:
        self.files = RollingJsonLines(os.path.join(log_dir, EXPORT_DIR), max_bytes)
        self.wall_clock_ms = wall_clock_ms
        self._queue: deque[dict] = deque()
        self._ready = asyncio.Event()
        self.dropped = 0
        self.written = 0
        self._writing = threading.Lock()  # a cancelled flush's thread may still be writing when close flushes

    def received(self, instance: ClientInstance, data: MetricsData) -> None:
        """ClientTelemetry's export hook: a push was accepted and decoded."""
        c = instance.client
        self.offer(push_record(
            self.wall_clock_ms(),
            {"client_instance_id": str(instance.instance_id), "client_id": c.client_id,
             "client_software_name": c.software_name, "client_software_version": c.software_version,
             "client_source_address": c.source_address, "client_source_port": c.source_port},
            instance.push_interval_ms, instance.subscription_id, instance.terminating, data.resource, data.points))

    def offer(self, record: dict) -> None:
        """Called on the request path: O(1), no I/O (the JSON encoding happens in the writer's thread)."""
        if len(self._queue) >= MAX_QUEUED:
            if self.dropped == 0:
                log.warning("client telemetry export is behind: dropping pushes (queue of %d full)", MAX_QUEUED)
            self.dropped += 1
            return
        self._queue.append(record)
        self._ready.set()

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            await asyncio.sleep(FLUSH_INTERVAL_S)   # gather a second of pushes into one write
            await self.flush()

    async def flush(self) -> None:
        self._ready.clear()
        if not self._queue:
            return
        records = list(self._queue)
        self._queue.clear()
        try:
            await asyncio.to_thread(self._write, records)
        except OSError as exc:  # a full or failing disk costs telemetry, not the broker
            log.warning("client telemetry export: %d pushes not written: %s", len(records), exc)

    def _write(self, records: list[dict]) -> None:
        lines = [json.dumps(r, separators=(",", ":")) + "\n" for r in records]
        with self._writing:
            self.files.write(lines)
            self.written += len(records)

    def prometheus_lines(self) -> list[str]:
        return (prometheus_family("kcoord_client_telemetry_exported_total", "counter",
                                  "Pushes written to the client telemetry export", [((), self.written)])
                + prometheus_family("kcoord_client_telemetry_export_dropped_total", "counter",
                                    "Pushes not exported: the export queue was full", [((), self.dropped)]))
