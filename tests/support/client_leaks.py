"""Kafka clients a test left running, found after its teardown (tests/conftest.py fails the test).

A client that outlives its test keeps talking to a server that test already stopped: librdkafka logs
"Connection refused" on stderr for the rest of the run (its lines land under whichever test is running,
or between tests), and kafka-python's producer thread does the same through `logging`. Closing a client
deterministically means closing it on every path, failures included: pytest keeps the frames of the
last failing test alive (sys.last_traceback), and a reference cycle through a test's frame (an
ExceptionInfo bound with `pytest.raises(...) as e`) keeps them alive until the cycle collector runs.

What can be counted:
- librdkafka: every handle (Producer, Consumer, AdminClient) runs one native thread named "rdk:main",
  visible in /proc/self/task (not in threading.enumerate); its broker threads come and go, so they are
  not counted. The Python objects are found with gc only to name them in the report.
- kafka-python (3.x): a KafkaProducer's sender and every other client's IO loop are Python threads,
  which hold their client alive until it is closed. aiokafka's clients live on the test's event loop,
  which pytest-asyncio closes.
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import types

_TASKS = "/proc/self/task"


def _librdkafka_handles() -> int:
    """How many librdkafka handles are alive in this process (0 where /proc is not available)."""
    try:
        tasks = os.listdir(_TASKS)
    except OSError:
        return 0
    count = 0
    for task in tasks:
        try:
            with open(f"{_TASKS}/{task}/comm") as comm:
                count += comm.read().strip() == "rdk:main"
        except OSError:  # the thread ended while we looked
            pass
    return count


def _kafka_python_threads() -> list[threading.Thread]:
    """kafka-python 3's client threads: a KafkaProducer's sender, and the IO loop every other client
    (consumer, admin) runs, which its selector names "kafka-io-<client id>"."""
    sender = sys.modules.get("kafka.producer.sender")
    return [t for t in threading.enumerate() if t.is_alive() and (
        t.name.startswith("kafka-io-") or (sender is not None and isinstance(t, sender.Sender)))]


def snapshot() -> tuple[int, frozenset[int]]:
    """What is running now: the count of librdkafka handles and the ids of kafka-python client threads."""
    return _librdkafka_handles(), frozenset(id(t) for t in _kafka_python_threads())


def _client_types() -> tuple[type, ...]:
    found: list[type] = []
    ck = sys.modules.get("confluent_kafka")
    if ck is not None:
        found += [ck.Producer, ck.Consumer]
        admin = sys.modules.get("confluent_kafka.admin")
        if admin is not None:
            found.append(admin.AdminClient)
    return tuple(found)


def _holder(obj: object, found: list) -> str:
    """Who keeps `obj` alive, as far as one step back tells: a frame (which function), or a type.
    `found` is the list the caller collected `obj` in."""
    holders = []
    for ref in gc.get_referrers(obj):
        if ref is found:
            continue
        if isinstance(ref, types.FrameType):
            holders.append(f"frame of {ref.f_code.co_name} ({ref.f_code.co_filename}:{ref.f_lineno})")
        elif isinstance(ref, dict):
            holders.append("a dict (module globals, an instance's attributes or a cache)")
        else:
            holders.append(type(ref).__name__)
    return ", ".join(sorted(set(holders))) or "nothing Python can see"


def leaked_since(before: tuple[int, frozenset[int]]) -> list[str]:
    """The clients started since `before` that are still running, described; [] when there are none."""
    handles, threads = before
    leaked: list[str] = []
    extra = _librdkafka_handles() - handles
    if extra > 0:
        kinds = _client_types()  # () before confluent_kafka is imported: nothing matches
        # issubclass(type(o)): isinstance would ask a dead weakref proxy for its class (ReferenceError)
        objects = [o for o in gc.get_objects() if issubclass(type(o), kinds)]
        names = [f"{type(o).__name__} held by {_holder(o, objects)}" for o in objects]
        leaked.append(f"{extra} librdkafka handle(s) still running: " + ("; ".join(names) or "no Python object left"))
    for thread in _kafka_python_threads():
        if id(thread) not in threads:
            leaked.append(f"kafka-python thread {thread.name!r} still running")
    return leaked


def close_leftovers() -> None:
    """After a leak was reported: collect cycles, then close the Producers and Consumers still reachable,
    so the rest of the run stays quiet. An AdminClient has no close(); one still referenced stays."""
    gc.collect()
    ck = sys.modules.get("confluent_kafka")
    if ck is None:
        return
    for obj in gc.get_objects():
        try:
            if issubclass(type(obj), ck.Producer):
                obj.purge()  # close() would otherwise wait up to message.timeout.ms for a stopped server
                obj.close()
            elif issubclass(type(obj), ck.Consumer):
                obj.close()
        except RuntimeError:  # closed already
            pass
        except ck.KafkaException:  # a fenced producer's abort failed: close() destroyed the handle anyway
            pass
