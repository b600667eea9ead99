"""The suite loads kcoord's pytest plugin (kafka_broker fixtures) from this checkout, not through its
installed `pytest11` entry point, which pyproject's addopts turn off (`-p no:kcoord`): an entry point is
imported before pytest puts the checkout on sys.path, so with an editable install of another checkout
(worktrees sharing a venv) the `kcoord` package would come from there. The suite's own server fixtures
(tests/support/fixtures.py: kcoord_server, ...) are thin names over the plugin's, loaded here too.

Every test must close the Kafka clients it starts, on every path (tests/support/client_leaks.py says
why and what is counted): one still running after the test's teardown fails the test."""
import pytest

from tests.support import client_leaks

pytest_plugins = ["kcoord.testkit.pytest_plugin", "kcoord.testkit.cluster_plugin", "tests.support.fixtures"]

_RUNNING_BEFORE = pytest.StashKey[tuple]()

# Under pytest-xdist (`make test`: two workers, --dist loadfile), a module is a unit of work: its
# module-scoped servers start once. Two more rules:
# - tests/analytics/ is one unit, so one worker starts the session's Spark JVM (conftest there);
# - each worker lists the modules that hold a slow test first, and the scheduler takes units in that order:
#   the minute-long cluster runs start early instead of being left alone at the end.
ANALYTICS = "tests/analytics/"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return ANALYTICS if nodeid.startswith(ANALYTICS) else super()._split_scope(nodeid)

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):   # not an xdist worker: collection order
        return
    slow = {item.path for item in items if item.get_closest_marker("slow") or item.get_closest_marker("spark")}
    items.sort(key=lambda item: item.path not in slow)   # stable: a module's tests stay together, in order


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    item.stash[_RUNNING_BEFORE] = client_leaks.snapshot()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    before = item.stash.get(_RUNNING_BEFORE, None)
    leaked = client_leaks.leaked_since(before) if before is not None else []
    if leaked:
        client_leaks.close_leftovers()
        pytest.fail("Kafka clients left running after the test (close them on every path, failures included):\n"
                    + "\n".join(leaked), pytrace=False)
    return result
