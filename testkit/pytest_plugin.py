"""pytest plugin (entry point `pytest11: kcoord`): a real Kafka broker for your application's tests.

    def test_my_consumer(kafka_broker):
        consumer = KafkaConsumer("events", bootstrap_servers=kafka_broker.bootstrap_servers, group_id="g")
        kafka_broker.faults.add("Heartbeat", error="REBALANCE_IN_PROGRESS", group_id="g", count=3)
        kafka_broker.timers.expire_member("g", member_id)   # no 45 s wait for a session to run out
        kafka_broker.kill()                                 # SIGKILL, then up again on the same data
        kafka_broker.client_metrics(client_id="my-app")     # what the client pushed (KIP-714 telemetry, when
                                                            # kcoord.client.telemetry.enable=true)

    @pytest.mark.kcoord(overrides={"num.partitions": "4"})
    def test_with_settings(kafka_broker): ...

    def test_two(kafka_broker_factory):
        a, b = kafka_broker_factory(), kafka_broker_factory({"group.max.size": "2"})

Fixtures: `kafka_broker` (a fresh broker per test), `kafka_broker_session` (one for the whole session;
use your own group and topic names per test), `kafka_broker_factory(overrides=None)`. Each is a
kcoord.testkit.broker_process.BrokerProcess: a `kcoord serve` child process on a free port with a temporary
data directory, test settings (broker_process.TEST_SETTINGS: no initial rebalance delay, a 100 ms
minimum session timeout, one __consumer_offsets partition) and its admin endpoint on; faults live in
the server, so a restart clears them. When a test fails, the server's log is added to its report.

`start_broker(workdir, overrides, name, cls=None)` starts one the same way for fixtures of your own (another
scope, a BrokerProcess subclass); `kcoord.testkit.waiting.wait_until(condition, timeout, what)` waits for
what a test expects, bounded.

Brokers are forked from one launcher per test session (testkit/launcher.py), started in the background
as soon as collection finds a test that uses these fixtures: a broker then starts in ~50 ms instead of
the ~0.5 s of a fresh interpreter (bench/fixture.py), and is still a process of its own.
"""
from __future__ import annotations

import pytest

LOG_LINES_ON_FAILURE = 200
FIXTURES = ("kafka_broker", "kafka_broker_session", "kafka_broker_factory")
_session_brokers: list = []
_launcher: list = []  # the session's kcoord.testkit.launcher.Launcher, once started


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kcoord(overrides=None): kcoord properties for this test's kafka_broker")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    if any(name in FIXTURES for item in items for name in getattr(item, "fixturenames", ())):
        session_launcher()  # it imports the broker while the first tests set up


def pytest_unconfigure(config: pytest.Config) -> None:
    while _launcher:
        _launcher.pop().close()


def session_launcher():
    """This session's launcher (started on first use; closed, and its brokers with it, when pytest exits):
    `BrokerProcess(..., launcher=session_launcher())` for a broker to prepare before it starts."""
    if not _launcher:
        from kcoord.testkit.launcher import Launcher

        _launcher.append(Launcher())
    return _launcher[0]


def start_broker(workdir, overrides: dict | None = None, name: str = "kcoord", cls: type | None = None, **kwargs):
    """Start a broker forked from this session's launcher, as the fixtures do: for a fixture of another
    scope, or a BrokerProcess subclass (`cls`) with helpers of your own; `kwargs` go to its constructor
    (`env`, `log_level`, ...). Stopping it is the caller's job."""
    from kcoord.testkit.broker_process import BrokerProcess

    return (cls or BrokerProcess)(workdir, overrides, name=name, launcher=session_launcher(), **kwargs).start()


@pytest.fixture
def kafka_broker_factory(request: pytest.FixtureRequest, tmp_path):
    """Start a kcoord broker per call: `kafka_broker_factory(overrides={...})`; all stop after the test."""
    started: list = []
    request.node.stash[_BROKERS] = started

    def start(overrides: dict | None = None, name: str | None = None):
        broker = start_broker(tmp_path, overrides, name or f"kcoord{len(started)}")
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest, kafka_broker_factory):
    """A fresh kcoord broker for this test; `@pytest.mark.kcoord(overrides={...})` sets properties."""
    marker = request.node.get_closest_marker("kcoord")
    overrides = marker.kwargs.get("overrides") if marker is not None else None
    return kafka_broker_factory(overrides)


@pytest.fixture(scope="session")
def kafka_broker_session(tmp_path_factory):
    """One kcoord broker for the whole test session."""
    broker = start_broker(tmp_path_factory.mktemp("kcoord-session"))
    _session_brokers.append(broker)
    yield broker
    _session_brokers.remove(broker)
    broker.stop()


_BROKERS = pytest.StashKey[list]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and report.when in ("setup", "call"):
        brokers = list(item.stash.get(_BROKERS, ()))
        if "kafka_broker_session" in getattr(item, "fixturenames", ()):
            brokers += _session_brokers
        for broker in brokers:
            tail = broker.log_text().splitlines()[-LOG_LINES_ON_FAILURE:]
            report.sections.append((f"kcoord log {broker.bootstrap_servers} (last {len(tail)} lines of "
                                    f"{broker.log_path})", "\n".join(tail)))
    return report
