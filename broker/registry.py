"""The single registry of served APIs: api_key -> handler and the version range we advertise.

Every module in broker/apis/ registers itself with the `api` decorator; ApiVersions is built from this
registry, so what we advertise is exactly what has a handler.
"""
from __future__ import annotations

import asyncio
import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

# A handler returns the response (or None: no answer), or an awaitable of it. One that can answer
# without waiting should return the value: the server then serves it inline, without a task switch.
Handler = Callable[[Any, Any], Any | Awaitable[Any]]


# A frame handler answers a whole request frame (size prefix included) without the general decode and
# encode, for the few requests a busy broker mostly serves (Heartbeat, OffsetCommit,
# ConsumerGroupHeartbeat); it is called with the broker, the frame and the client's host. It returns
# (error code, whole response frame); or an asyncio.Future of that pair when the answer must wait (a
# commit waits for its fsync: the connection serves nothing else meanwhile, as when a handler awaits);
# or None -- having done nothing -- when it does not take this frame: the server then serves it through
# `handler`, which gives the same answer (a test shows they agree).
FrameHandler = Callable[[Any, bytes, str], "tuple[int, bytes] | asyncio.Future[tuple[int, bytes]] | None"]


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    # What ApiVersions advertises as the lowest version, when it is below the lowest one served: Kafka 4
    # advertises Produce from v0 but refuses v0-2 (KAFKA-18659: librdkafka before 2.11.1 turns off
    # gzip/snappy/lz4 when a broker does not list Produce v0). A request at such a version closes the
    # connection, as any version not served does.
    advertised_min_version: int | None = None

    @property
    def advertised_min(self) -> int:
        return self.min_version if self.advertised_min_version is None else self.advertised_min_version

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


_APIS: dict[int, ApiSpec] = {}
_FRAME_HANDLERS: dict[int, FrameHandler] = {}
_loaded = False


def api(*, key: int, name: str, min_version: int, max_version: int,
        advertised_min_version: int | None = None) -> Callable[[Handler], Handler]:
    """Register `handle(ctx, request)` as the handler of `key` for [min_version, max_version]."""
    if not 0 <= min_version <= max_version:
        raise ValueError(f"bad version range {min_version}..{max_version} for {name}")
    if advertised_min_version is not None and not 0 <= advertised_min_version < min_version:
        raise ValueError(f"advertised minimum {advertised_min_version} of {name} is not below {min_version}")

    def register(handler: Handler) -> Handler:
        existing = _APIS.get(key)
        if existing is not None and existing.handler is not handler:
            # Re-importing the same module (e.g. importlib.reload in a test) replaces it; two modules
            # claiming one key is a bug.
            if existing.handler.__module__ != handler.__module__:
                raise ValueError(f"api key {key} registered twice: {existing.name} and {name}")
        _APIS[key] = ApiSpec(key, name, min_version, max_version, handler, advertised_min_version)
        return handler

    return register


def frame_handler(*, key: int) -> Callable[[FrameHandler], FrameHandler]:
    """Register a fast path for whole frames of api `key` (whose module also registers its `api`)."""

    def register(handler: FrameHandler) -> FrameHandler:
        _FRAME_HANDLERS[key] = handler
        return handler

    return register


def version_range(key: int) -> tuple[int, int]:
    """(min, max) version registered for `key` so far: what a module's frame handler serves, read
    right after the module registers its `api` (no import of the other modules)."""
    spec = _APIS[key]
    return spec.min_version, spec.max_version


def load_all() -> None:
    """Import every module in broker/apis/ once, so each registers itself."""
    global _loaded
    if _loaded:
        return
    import kcoord.broker.apis as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
    _loaded = True


def lookup(key: int) -> ApiSpec | None:
    if not _loaded:  # every request comes through here
        load_all()
    return _APIS.get(key)


def served() -> list[ApiSpec]:
    """Every registered API, by key."""
    load_all()
    return [_APIS[k] for k in sorted(_APIS)]


def frame_handlers() -> dict[int, tuple[str, FrameHandler]]:
    """api key -> (api name, frame handler), for the APIs that have one."""
    load_all()
    return {key: (_APIS[key].name, handler) for key, handler in _FRAME_HANDLERS.items() if key in _APIS}
