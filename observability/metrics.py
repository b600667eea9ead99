"""Metrics a user can scrape or watch.

One in-process registry of counters, gauges and latency summaries with labels, rendered as Prometheus
text at GET /metrics (plain asyncio HTTP on metrics.port) and, when metrics.statsd.address is set,
pushed as StatsD lines over UDP every metrics.statsd.interval.ms.

Names follow Prometheus conventions (kcoord_<what>_<unit>). Hooks for the other subsystems:
  requests:  request_done(api, error_code, seconds)      -- called by the server for every answer
  groups:    rebalance(group, cause), group_members(group, n), commit_latency(seconds)
  storage:   storage_latency("append"|"fsync", seconds)
  others:    collectors -- callables giving whole Prometheus families (lines) at each scrape, for series
             owned elsewhere (the metrics clients push, KIP-714: broker/client_telemetry.py)
"""
from __future__ import annotations

import asyncio
import logging
import math
import re
from collections import defaultdict
from collections.abc import Callable

log = logging.getLogger("kcoord.metrics")

Labels = tuple[tuple[str, str], ...]

HELP = {
    "kcoord_requests_total": ("counter", "Requests answered, by API and error code"),
    "kcoord_request_seconds": ("summary", "Time to serve a request (decode to encode), by API"),
    "kcoord_connections_opened_total": ("counter", "Connections accepted, by listener"),
    "kcoord_connections": ("gauge", "Open connections, by listener"),
    "kcoord_partition_errors_total": ("counter", "Partition-level errors in Produce and Fetch responses"),
    "kcoord_produced_records_total": ("counter", "Records appended by Produce, by topic"),
    "kcoord_produced_bytes_total": ("counter", "Record-batch bytes appended by Produce, by topic"),
    "kcoord_fetched_bytes_total": ("counter", "Record-batch bytes returned by Fetch, by topic"),
    "kcoord_group_rebalances_total": ("counter", "Completed rebalances, by group and cause"),
    "kcoord_group_members": ("gauge", "Members of a group"),
    "kcoord_offset_commit_seconds": ("summary", "OffsetCommit latency including the durable write"),
    "kcoord_storage_seconds": ("summary", "Storage append and fsync latency"),
    "kcoord_throttle_seconds_total": ("counter", "Time connections were muted for quotas or throttle faults "
                                      "(KIP-219), by API and client id"),
    "kcoord_faults_fired_total": ("counter", "Injected faults that fired (admin endpoint), by API, action and fault"),
}


def _labels(**kv: object) -> Labels:
    return tuple(sorted((k, str(v)) for k, v in kv.items()))


class Summary:
    __slots__ = ("count", "sum", "max")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.max = 0.0

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        if value > self.max:
            self.max = value


class _RequestSeries:
    """kcoord_requests_total for one (api, error code), and its api's kcoord_request_seconds."""
    __slots__ = ("labels", "count", "latency")

    def __init__(self, labels: Labels, latency: Summary) -> None:
        self.labels = labels
        self.count = 0
        self.latency = latency


class Metrics:
    def __init__(self) -> None:
        self.counters: dict[str, dict[Labels, float]] = defaultdict(lambda: defaultdict(float))
        self.gauges: dict[str, dict[Labels, float]] = defaultdict(lambda: defaultdict(float))
        self.summaries: dict[str, dict[Labels, Summary]] = defaultdict(lambda: defaultdict(Summary))
        # request_done runs for every request: its series are looked up once per (api, error code)
        # rather than building and sorting label tuples each time.
        self._request_series: dict[tuple[str, int], _RequestSeries] = {}
        self._group_members = self.gauges["kcoord_group_members"]
        self.collectors: list[Callable[[], list[str]]] = []

    # -- generic ----------------------------------------------------------------------------------
    def inc(self, name: str, value: float = 1.0, **labels: object) -> None:
        self.counters[name][_labels(**labels)] += value

    def set_gauge(self, name: str, value: float, **labels: object) -> None:
        self.gauges[name][_labels(**labels)] = value

    def add_gauge(self, name: str, delta: float, **labels: object) -> None:
        self.gauges[name][_labels(**labels)] += delta

    def observe(self, name: str, seconds: float, **labels: object) -> None:
        self.summaries[name][_labels(**labels)].observe(seconds)

    # -- hooks ------------------------------------------------------------------------------------
    def request_done(self, api: str, error_code: int, seconds: float) -> None:
        series = self._request_series.get((api, error_code))
        if series is None:
            series = self._request_series[(api, error_code)] = _RequestSeries(
                _labels(api=api, error_code=error_code), self.summaries["kcoord_request_seconds"][_labels(api=api)])
        series.count += 1
        latency = series.latency  # Summary.observe, inlined: this runs for every request
        latency.count += 1
        latency.sum += seconds
        if seconds > latency.max:
            latency.max = seconds

    def _publish_request_counts(self) -> None:
        # request_done counts in its series; the counter table gets them when someone looks
        requests = self.counters["kcoord_requests_total"]
        for series in self._request_series.values():
            requests[series.labels] = float(series.count)

    def connection_opened(self, listener: str) -> None:
        self.inc("kcoord_connections_opened_total", listener=listener)
        self.add_gauge("kcoord_connections", 1, listener=listener)

    def connection_closed(self, listener: str) -> None:
        self.add_gauge("kcoord_connections", -1, listener=listener)

    def rebalance(self, group: str, cause: str) -> None:
        self.inc("kcoord_group_rebalances_total", group=group, cause=cause)

    def group_members(self, group: str, members: int) -> None:
        # set on every heartbeat: its one label built directly (what _labels(group=group) gives)
        self._group_members[(("group", str(group)),)] = members

    def commit_latency(self, seconds: float) -> None:
        self.observe("kcoord_offset_commit_seconds", seconds)

    def storage_latency(self, op: str, seconds: float) -> None:
        self.observe("kcoord_storage_seconds", seconds, op=op)

    # -- exposition -------------------------------------------------------------------------------
    def render_prometheus(self) -> str:
        self._publish_request_counts()
        out: list[str] = []
        for table in (self.counters, self.gauges):
            for name in sorted(table):
                _header(out, name)
                for labels, value in sorted(table[name].items()):
                    out.append(f"{name}{_fmt_labels(labels)} {_num(value)}")
        for name in sorted(self.summaries):
            _header(out, name)
            for labels, s in sorted(self.summaries[name].items()):
                out.append(f"{name}_count{_fmt_labels(labels)} {s.count}")
                out.append(f"{name}_sum{_fmt_labels(labels)} {_num(s.sum)}")
        for collect in self.collectors:
            out.extend(collect())
        return "\n".join(out) + "\n"

    def statsd_lines(self, previous: dict[str, float], prefix: str = "kcoord") -> list[str]:
        """Counter deltas since `previous` (updated in place), gauges as they are, timers as means."""
        self._publish_request_counts()
        lines: list[str] = []
        for name, series in self.counters.items():
            for labels, value in series.items():
                key = _statsd_name(name, labels, prefix)
                delta = value - previous.get(key, 0.0)
                previous[key] = value
                if delta:
                    lines.append(f"{key}:{_num(delta)}|c")
        for name, series in self.gauges.items():
            for labels, value in series.items():
                lines.append(f"{_statsd_name(name, labels, prefix)}:{_num(value)}|g")
        for name, series in self.summaries.items():
            for labels, s in series.items():
                key = _statsd_name(name, labels, prefix)
                count_key = key + "#count"
                new = s.count - previous.get(count_key, 0)
                if new:
                    sum_key = key + "#sum"
                    mean_ms = (s.sum - previous.get(sum_key, 0.0)) / new * 1000.0
                    previous[count_key], previous[sum_key] = s.count, s.sum
                    lines.append(f"{key}:{mean_ms:.3f}|ms")
        return lines


_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(text: str) -> str:
    """`text` made a valid metric or label name: other characters become _, a leading digit gets one."""
    name = _NOT_NAME.sub("_", text)
    return "_" + name if name[:1].isdigit() or not name else name


def prometheus_family(name: str, kind: str, text: str, samples: list[tuple[Labels, float]]) -> list[str]:
    """One family's lines: HELP, TYPE, then a line per (labels, value)."""
    out = [f"# HELP {name} {_escape(text)}", f"# TYPE {name} {kind}"]
    out += [f"{name}{_fmt_labels(labels)} {_num(value)}" for labels, value in samples]
    return out


def _header(out: list[str], name: str) -> None:
    kind, text = HELP.get(name, ("untyped", name))
    out.append(f"# HELP {name} {text}")
    out.append(f"# TYPE {name} {kind}")


def _fmt_labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    if math.isfinite(value) and value == int(value):
        return str(int(value))
    return repr(value)


def _statsd_name(name: str, labels: Labels, prefix: str) -> str:
    parts = [prefix + "." + name.removeprefix("kcoord_")]
    parts += [f"{k}.{v}".replace(":", "_").replace("|", "_").replace(" ", "_") for k, v in labels]
    return ".".join(parts)


class PrometheusEndpoint:
    """GET /metrics over plain asyncio HTTP/1.0; anything else is a 404."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass  # headers are irrelevant
            parts = request_line.decode("latin-1").split()
            if len(parts) >= 2 and parts[0] == "GET" and parts[1].split("?")[0] == "/metrics":
                status, body = "200 OK", self.metrics.render_prometheus().encode()
                ctype = "text/plain; version=0.0.4; charset=utf-8"
            else:
                status, body, ctype = "404 Not Found", b"not found\n", "text/plain"
            writer.write(f"HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


class StatsdPusher:
    """Push StatsD lines over UDP (asyncio-dgram) every `interval_s`; UDP loss is acceptable."""

    def __init__(self, metrics: Metrics, host: str, port: int, interval_s: float, prefix: str = "kcoord") -> None:
        self.metrics, self.host, self.port, self.interval_s = metrics, host, port, interval_s
        self.prefix = prefix
        self._task: asyncio.Task | None = None
        self._previous: dict[str, float] = {}
        self._stream = None

    async def start(self) -> None:
        import asyncio_dgram

        self._stream = await asyncio_dgram.connect((self.host, self.port))
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="statsd")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.push()

    async def push(self) -> None:
        lines = self.metrics.statsd_lines(self._previous, self.prefix)
        packet: list[str] = []
        size = 0
        for line in lines:  # keep datagrams under a typical 1432-byte MTU payload
            if packet and size + len(line) + 1 > 1400:
                await self._send("\n".join(packet))
                packet, size = [], 0
            packet.append(line)
            size += len(line) + 1
        if packet:
            await self._send("\n".join(packet))

    async def _send(self, payload: str) -> None:
        try:
            await self._stream.send(payload.encode())
        except OSError as exc:  # nobody listening: ICMP refused surfaces here
            log.debug("statsd push failed: %s", exc)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._stream is not None:
            await self.push()
            self._stream.close()
