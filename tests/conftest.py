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
