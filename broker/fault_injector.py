"""Faults installed in a running broker (`broker.faults`), on top of broker.hooks.

Each live fault is one `before` hook on its API key, so requests of other APIs keep the fast paths,
and with no live fault no hook is installed at all (the server then serves Heartbeat and OffsetCommit
from their frames again). A fault that fires answers with an error response built from the request
(top-level error_code, and the per-partition / per-group codes of the APIs that carry them), waits,
or closes the connection; it is logged with the request it hit and counted in
kcoord_faults_fired_total.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kcoord.broker.faults import Fault, FaultSpec, request_facts
from kcoord.broker.hooks import CloseConnection
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

log = logging.getLogger("kcoord.faults")


class FaultInjector:
    def __init__(self, hooks: Any, metrics: Any) -> None:
        self._hooks = hooks
        self._metrics = metrics
        self._faults: dict[int, Fault] = {}
        self._removers: dict[int, Callable[[], None]] = {}
        self._next_id = 1

    def add(self, spec: FaultSpec) -> Fault:
        fault = Fault(self._next_id, spec)
        self._next_id += 1
        self._faults[fault.id] = fault
        self._removers[fault.id] = self._hooks.before(spec.api_key, self._hook_for(fault))
        log.info("fault %d added: %s", fault.id, spec.to_json())
        return fault

    def list(self) -> list[Fault]:
        return list(self._faults.values())

    def remove(self, fault_id: int) -> bool:
        fault = self._faults.pop(fault_id, None)
        if fault is None:
            return False
        self._uninstall(fault)
        log.info("fault %d removed (fired %d times)", fault_id, fault.fired)
        return True

    def clear(self) -> int:
        ids = list(self._faults)
        for fault_id in ids:
            self.remove(fault_id)
        return len(ids)

    def _uninstall(self, fault: Fault) -> None:
        remove = self._removers.pop(fault.id, None)
        if remove is not None:
            remove()

    def _hook_for(self, fault: Fault) -> Callable:
        async def before(ctx: Any, request: Any) -> Any:
            facts = request_facts(ctx.api_key, ctx.api_version, ctx.client_id, request)
            if not fault.decide(facts):
                return None
            if fault.exhausted:
                self._uninstall(fault)  # listed until cleared, but no longer in the request path
            spec = fault.spec
            what = spec.error.name if spec.action == "error" else spec.action
            if spec.throttle_ms:
                what += f" {spec.throttle_ms} ms"
            if spec.delay_ms:
                what += f" {spec.delay_ms} ms" if spec.action == "delay" else f" after {spec.delay_ms} ms"
            log.info("fault %d fired (%s, %d of %s): %s correlation %d from %s:%d", fault.id, what, fault.fired,
                     spec.count if spec.count is not None else "unlimited", facts.describe(),
                     ctx.correlation_id, ctx.client_host, ctx.client_port)
            self._metrics.inc("kcoord_faults_fired_total", api=m.api_name(ctx.api_key), action=spec.action,
                              fault=fault.id)
            if spec.delay_ms:
                await asyncio.sleep(spec.delay_ms / 1000.0)
            if spec.action == "close":
                raise CloseConnection(f"fault {fault.id}: close instead of answering {facts.describe()}")
            if spec.action == "error":
                return error_response(ctx.api_key, request, spec.error)
            if spec.action == "throttle":  # the server sets throttle_time_ms and mutes the connection
                ctx.throttle_ms = max(ctx.throttle_ms, spec.throttle_ms)
            return None  # delay, throttle: now serve it as usual

        return before


def error_response(api_key: int, request: Any, code: ErrorCode) -> Any:
    """The API's response carrying `code` wherever the response reports errors for this request."""
    name = m.api_name(api_key)
    cls = getattr(m, name + "Response")
    response = cls()
    if "error_code" in cls.__slots__:
        response.error_code = int(code)
    mirror = _MIRRORS.get(name)
    if mirror is not None:
        mirror(cls, request, response, int(code))
    return response


def _offset_commit(cls: Any, request: Any, response: Any, code: int) -> None:
    response.topics = [cls.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
        cls.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
        for p in t.partitions]) for t in request.topics]


def _produce(cls: Any, request: Any, response: Any, code: int) -> None:
    response.responses = [cls.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
        cls.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
        for p in t.partition_data]) for t in request.topic_data]


def _describe_groups(cls: Any, request: Any, response: Any, code: int) -> None:
    response.groups = [cls.DescribedGroup(group_id=g, error_code=code) for g in request.groups]


def _find_coordinator(cls: Any, request: Any, response: Any, code: int) -> None:
    response.node_id, response.host, response.port = -1, "", -1
    response.coordinators = [cls.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code)
                             for k in request.coordinator_keys or ()]


def _delete_groups(cls: Any, request: Any, response: Any, code: int) -> None:
    response.results = [cls.DeletableGroupResult(group_id=g, error_code=code) for g in request.groups_names]


def _offset_fetch(cls: Any, request: Any, response: Any, code: int) -> None:
    if request.groups:  # v8+: one result per group
        response.groups = [cls.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code)
                           for g in request.groups]


def _share_group_describe(cls: Any, request: Any, response: Any, code: int) -> None:
    response.groups = [cls.DescribedGroup(group_id=g, error_code=code) for g in request.group_ids]


def _describe_share_group_offsets(cls: Any, request: Any, response: Any, code: int) -> None:
    response.groups = [cls.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, error_code=code, topics=[])
                       for g in request.groups]


_MIRRORS = {"ShareGroupDescribe": _share_group_describe, "DescribeShareGroupOffsets": _describe_share_group_offsets,
            "OffsetCommit": _offset_commit, "Produce": _produce, "DescribeGroups": _describe_groups,
            "FindCoordinator": _find_coordinator, "DeleteGroups": _delete_groups, "OffsetFetch": _offset_fetch}
