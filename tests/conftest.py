"""The suite loads kcoord's pytest plugin (kafka_broker fixtures) from this checkout, not through its
installed `pytest11` entry point, which pyproject's addopts turn off (`-p no:kcoord`): an entry point is
imported before pytest puts the checkout on sys.path, so with an editable install of another checkout
(worktrees sharing a venv) the `broker` package would come from there."""
pytest_plugins = ["broker.pytest_plugin"]
