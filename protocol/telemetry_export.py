"""The on-disk format of exported client telemetry (KIP-714): what the broker's receiver writes
(broker/telemetry_export.py) and the analytics pipeline reads (analytics/client_metrics.py).

Kafka hands each push to a ClientTelemetryReceiver plugin (KIP-714's exporter); kcoord's built-in receiver
also appends it to JSON lines under `<log.dirs>/kcoord-client-telemetry/`, one line per accepted push:

  {"timestamp": <broker wall clock, epoch ms, when the push was received>,
   "client_instance_id", "client_id", "client_software_name", "client_software_version",
   "client_source_address", "client_source_port", "subscription_id", "push_interval_ms", "terminating",
   "resource": {the push's resource attributes},
   "points": [{"name", "kind", "value", "count" (histograms, summaries), "unit", "monotonic",
               "time_unix_nano" (the client's clock), "attributes": {...}}, ...]}

Files are `<20-digit sequence>.jsonl`, the highest the newest; a broker start opens a new one, so a line
torn by a crash ends its file and readers skip it. The directory name is not `<topic>-<n>`: the log
manager and the analytics' segment listing pass it by.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kcoord.protocol.otlp import DataPoint

EXPORT_DIR = "kcoord-client-telemetry"
_FILE = re.compile(r"^(?P<seq>\d{20})\.jsonl$")


def file_name(seq: int) -> str:
    return f"{seq:020d}.jsonl"


def file_seq(name: str) -> int | None:
    """The sequence number of an export file's name; None for anything else in the directory."""
    m = _FILE.match(name)
    return int(m["seq"]) if m else None


def point_record(p: DataPoint) -> dict:
    out: dict = {"name": p.metric, "kind": p.kind, "value": p.value, "attributes": dict(p.attributes),
                 "time_unix_nano": p.time_unix_nano}
    if p.count is not None:
        out["count"] = p.count
    if p.unit:
        out["unit"] = p.unit
    if p.monotonic:
        out["monotonic"] = True
    return out


def push_record(timestamp_ms: int, client: Mapping[str, str | int], push_interval_ms: int, subscription_id: int,
                terminating: bool, resource: Mapping[str, str], points: Iterable[DataPoint]) -> dict:
    """One line of the export. `client`: the instance's selectors (client_instance_id, client_id,
    client_software_name/version, client_source_address/port)."""
    return {"timestamp": timestamp_ms, **client, "subscription_id": subscription_id,
            "push_interval_ms": push_interval_ms, "terminating": terminating, "resource": dict(resource),
            "points": [point_record(p) for p in points]}
