# kcoord — the two commands that matter: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS ?=
# The suite's tests mostly wait (sessions, leases, clients' backoffs): two workers take about 11 minutes of
# its 20 on a 2-core machine. PYTEST_WORKERS=0 runs it in this process, as plain `pytest` does.
PYTEST_WORKERS ?= 2
PYTEST_DIST := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: install run test test-fast lint bench analyze docker-build compose-up tools clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## run: start the server in the foreground (127.0.0.1:9092, data in ./data); Ctrl-C stops it.
run: $(STAMP)
	$(VENV)/bin/kcoord serve $(ARGS)

## tools: what the client tests need beyond PyPI (kafkajs from npm, kcat from Debian), idempotently.
tools:
	@bash scripts/ensure-test-tools.sh

## test: install everything, then run the whole suite.
test: $(STAMP) tools
	$(PY) -m pytest $(PYTEST_DIST) $(ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest $(PYTEST_DIST) -m "not slow and not spark" $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pyright --pythonpath $(PY)

bench: $(STAMP)
	$(PY) -m bench all $(ARGS)

analyze: $(STAMP)
	$(VENV)/bin/kcoord analyze all --log-dirs ./data --out ./analytics-out $(ARGS)

docker-build:
	docker build -f docker/Dockerfile -t kcoord:latest .

compose-up:
	docker compose -f docker/docker-compose.yml up --build

clean:
	rm -rf $(VENV) build dist *.egg-info src/*.egg-info .pytest_cache .ruff_cache
