"""The admin endpoint (kcoord.admin.listener, off by default): fault injection and timer control over
HTTP + JSON, for test suites in any language. No authentication: bind it to loopback, in tests.

    GET    /faults                     {"faults": [fault, ...]}   (with matched / fired counters)
    POST   /faults                     a fault object or a list of them (broker/faults.py) -> 201
                                       {"faults": [...]}; all are checked first: one bad, none added
    DELETE /faults                     {"cleared": N}
    DELETE /faults/ID                  {"removed": ID}, 404 if there is no such fault
    POST   /groups/expire-member       {"group_id", "member_id"}: the member's session expires now
    POST   /groups/fire-timers         {"group_id"}: the group's pending join / sync timers fire now
    POST   /offsets/run-retention      {}: offset retention runs now -> {"records": N written}
    POST   /coordinator/hold-load      {"partitions": [N, ...]}: a load of these __consumer_offsets partitions
                                       waits until released -> {"held": [...]}
    POST   /coordinator/release-load   {"partitions": [...]} or {} (all): held loads go on -> {"held": [...]}
    POST   /coordinator/reload         {}: every __consumer_offsets partition loads again, in order, held ones
                                       wait (as after a restart) -> {"partitions": N}
    POST   /coordinator/fail-offsets-writes  {"count": N} (default 1): the next N writes to __consumer_offsets
                                       fail -> {"failing": N}
    POST   /transactions/hold-load, /transactions/release-load, /transactions/reload: the same for
                                       __transaction_state (503 without a transaction coordinator)
    GET    /clients[?client_id=ID]     {"enabled": bool, "clients": [instance, ...]}: the client instances known to
                                       the telemetry receiver (KIP-714) with the metrics they pushed
    GET    /health                     {"ok": true, "groups_loaded": bool} (__consumer_offsets replayed)

In a cluster every node has its endpoint, for its own requests (faults) and its own coordinators: a
group's timers on a node that does not lead the group's __consumer_offsets partition answer 421
(Misdirected Request) naming the node that does, as NOT_COORDINATOR names none but FindCoordinator does.

Answers are JSON; bad input is a 4xx with {"error": "..."} and changes nothing. `AdminApi.handle`
is the routing, without sockets; `AdminEndpoint` is the HTTP/1.1 transport (one request per
connection).
"""
from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from typing import Any

from kcoord.broker.faults import FaultError, FaultSpec

log = logging.getLogger("kcoord.admin")

MAX_BODY = 1 << 20
REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           411: "Length Required", 413: "Payload Too Large", 421: "Misdirected Request", 503: "Service Unavailable"}


class AdminError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _json_body(body: bytes) -> Any:
    if not body.strip():
        return {}
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AdminError(400, f"the body is not valid JSON: {exc}") from None


def _string(obj: Any, name: str) -> str:
    value = obj.get(name) if isinstance(obj, dict) else None
    if not isinstance(value, str) or not value:
        raise AdminError(400, f"{name} (a non-empty string) is required")
    return value


class AdminApi:
    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict]:
        try:
            if path.split("?", 1)[0].rstrip("/") == "/clients":
                return self._clients(method, urllib.parse.parse_qs(urllib.parse.urlsplit(path).query))
            return self._route(method, path.split("?", 1)[0].rstrip("/") or "/", body)
        except AdminError as exc:
            return exc.status, {"error": str(exc)}

    def _route(self, method: str, path: str, body: bytes) -> tuple[int, dict]:
        faults = self.broker.faults
        if path == "/faults":
            if method == "GET":
                return 200, {"faults": [f.to_json() for f in faults.list()]}
            if method == "POST":
                raw = _json_body(body)
                items = raw if isinstance(raw, list) else [raw]
                try:
                    specs = [FaultSpec.parse(item) for item in items]
                except FaultError as exc:
                    raise AdminError(400, str(exc)) from None
                return 201, {"faults": [faults.add(spec).to_json() for spec in specs]}
            if method == "DELETE":
                return 200, {"cleared": faults.clear()}
            raise AdminError(405, f"{method} /faults: use GET, POST or DELETE")
        if path.startswith("/faults/"):
            if method != "DELETE":
                raise AdminError(405, f"{method} {path}: use DELETE")
            text = path.removeprefix("/faults/")
            if not text.isdigit():
                raise AdminError(400, f"fault id must be a number, got {text!r}")
            if not faults.remove(int(text)):
                raise AdminError(404, f"no fault {text}")
            return 200, {"removed": int(text)}
        timers = {"/groups/expire-member": self._expire_member, "/groups/fire-timers": self._fire_timers,
                  "/offsets/run-retention": self._run_retention}.get(path)
        if timers is not None:
            if method != "POST":
                raise AdminError(405, f"{method} {path}: use POST")
            return timers(_json_body(body))
        loads = {"/coordinator/hold-load": self._hold_load, "/coordinator/release-load": self._release_load,
                 "/coordinator/reload": self._reload, "/coordinator/fail-offsets-writes": self._fail_offsets_writes,
                 "/transactions/hold-load": self._hold_load, "/transactions/release-load": self._release_load,
                 "/transactions/reload": self._reload}.get(path)
        if loads is not None:
            if method != "POST":
                raise AdminError(405, f"{method} {path}: use POST")
            txn = path.startswith("/transactions/")
            # the endpoint starts after both coordinators are built (Broker.start), so both are here
            runtime = self.broker.txn_coordinator if txn else self.broker.group_coordinator
            return loads(runtime, _json_body(body))
        if path == "/health" and method == "GET":
            return 200, {"ok": True, "groups_loaded": self.broker.group_coordinator.loaded_event.is_set()}
        raise AdminError(404, f"no such endpoint: {method} {path}")

    def _clients(self, method: str, query: dict[str, list[str]]) -> tuple[int, dict]:
        if method != "GET":
            raise AdminError(405, f"{method} /clients: use GET")
        unknown = set(query) - {"client_id"}
        if unknown:
            raise AdminError(400, f"unknown query parameter {sorted(unknown)[0]!r} (only client_id)")
        client_id = query["client_id"][0] if "client_id" in query else None
        telemetry = self.broker.client_telemetry
        return 200, {"enabled": telemetry.enabled,
                     "clients": [i.to_json() for i in telemetry.instances(client_id)]}

    def _check_coordinates(self, group_id: str) -> None:
        """AdminError 421 when another node of the cluster leads the group's __consumer_offsets partition."""
        cluster = self.broker.cluster
        if cluster is None:
            return
        from kcoord.cluster.metadata_image import TopicPartition
        from kcoord.metadata.topics import CONSUMER_OFFSETS
        from kcoord.protocol.consumer_offsets import partition_for

        partition = partition_for(group_id, self.broker.config.get("offsets.topic.num.partitions"))
        state = cluster.image.partition(TopicPartition(CONSUMER_OFFSETS, partition))
        leader = -1 if state is None else state.registration.leader
        if leader != cluster.node_id:
            where = f"node {leader}" if leader >= 0 else "no node now"
            raise AdminError(421, f"group {group_id!r} is coordinated by {where} ({CONSUMER_OFFSETS}-{partition}), "
                                  f"not by node {cluster.node_id}: use that node's admin endpoint")

    def _expire_member(self, body: Any) -> tuple[int, dict]:
        group_id, member_id = _string(body, "group_id"), _string(body, "member_id")
        self._check_coordinates(group_id)
        if not self.broker.group_coordinator.expire_member(group_id, member_id):
            raise AdminError(404, f"group {group_id!r} has no member {member_id!r}")
        log.info("admin: expired member %s of group %s", member_id, group_id)
        return 200, {"expired": True, "group_id": group_id, "member_id": member_id}

    def _fire_timers(self, body: Any) -> tuple[int, dict]:
        group_id = _string(body, "group_id")
        self._check_coordinates(group_id)
        fired = self.broker.group_coordinator.fire_group_timers(group_id)
        log.info("admin: fired %d timers of group %s", fired, group_id)
        return 200, {"fired": fired, "group_id": group_id}

    def _run_retention(self, body: Any) -> tuple[int, dict]:
        if not isinstance(body, dict) or body:
            raise AdminError(400, "run-retention takes no parameters (send {} or nothing)")
        records = self.broker.group_coordinator.run_offset_retention()
        log.info("admin: offset retention ran, %d records written", records)
        return 200, {"records": records}


    @staticmethod
    def _hold_load(runtime: Any, body: Any) -> tuple[int, dict]:
        held = runtime.hold_load(_partitions(body, required=True))
        log.info("admin: loads held: %s", held)
        return 200, {"held": held}

    @staticmethod
    def _release_load(runtime: Any, body: Any) -> tuple[int, dict]:
        return 200, {"held": runtime.release_load(_partitions(body, required=False))}

    @staticmethod
    def _reload(runtime: Any, body: Any) -> tuple[int, dict]:
        if not isinstance(body, dict) or body:
            raise AdminError(400, "reload takes no parameters (send {} or nothing)")
        try:
            partitions = runtime.reload()
        except RuntimeError as exc:
            raise AdminError(503, str(exc)) from None
        log.info("admin: reloading %d partitions", partitions)
        return 200, {"partitions": partitions}

    @staticmethod
    def _fail_offsets_writes(runtime: Any, body: Any) -> tuple[int, dict]:
        count = body.get("count", 1) if isinstance(body, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise AdminError(400, "count (a positive integer) is optional, 1 if absent")
        try:
            failing = runtime.fail_offsets_writes(count)
        except RuntimeError as exc:
            raise AdminError(503, str(exc)) from None
        log.info("admin: the next %d __consumer_offsets writes fail", failing)
        return 200, {"failing": failing}


def _partitions(body: Any, required: bool) -> list[int] | None:
    value = body.get("partitions") if isinstance(body, dict) else None
    if value is None and not required:
        return None
    if not isinstance(value, list) or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0
                                              for p in value):
        raise AdminError(400, "partitions (a list of partition numbers) is required")
    return value


class AdminEndpoint:
    """HTTP/1.1 over asyncio streams, one request per connection (Connection: close)."""

    def __init__(self, broker: Any) -> None:
        self.api = AdminApi(broker)
        self._server: asyncio.Server | None = None
        self.host = ""
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port)
        self.host = host
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, payload = await self._read_and_handle(reader)
            body = (json.dumps(payload) + "\n").encode()
            writer.write(f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _read_and_handle(self, reader: asyncio.StreamReader) -> tuple[int, dict]:
        request_line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1").split()
        headers: dict[str, str] = {}
        while True:
            line = await asyncio.wait_for(reader.readline(), 10)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if len(request_line) < 2:
            return 400, {"error": "not an HTTP request"}
        method, path = request_line[0].upper(), request_line[1]
        length_text = headers.get("content-length", "0")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return 411, {"error": "send a Content-Length, not a chunked body"}
        if not length_text.isdigit():
            return 400, {"error": f"bad Content-Length {length_text!r}"}
        if int(length_text) > MAX_BODY:
            return 413, {"error": f"body larger than {MAX_BODY} bytes"}
        body = await asyncio.wait_for(reader.readexactly(int(length_text)), 10)
        return self.api.handle(method, path, body)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
