# The two commands of a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8000

.PHONY: install run serve test services sandbox lint typecheck pytest bench clean web web-check chromium

# The web app and GraphiQL (web/), built into the Python package (calcgraph/webui/dist); rebuilt
# when the lock file, a source or the GraphQL schema changes.
WEB_STAMP := calcgraph/webui/dist/.built
WEB_SOURCES := $(shell find web/src -path web/src/gql -prune -o -type f -print 2>/dev/null) \
	web/index.html web/graphiql.html web/vite.config.ts web/codegen.ts web/tsconfig.json \
	web/package.json schema.graphql

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

$(WEB_STAMP): web/package-lock.json $(WEB_SOURCES)
	cd web && npm ci --no-audit --no-fund && npm run build
	touch $(WEB_STAMP)

web: $(WEB_STAMP)

## Byte-compiled as `pip install .` does for a wheel: an editable install is not, and where
## PYTHONDONTWRITEBYTECODE is set every start compiles the whole package again (about a second
## of `calcgraph serve`'s start). Only changed modules are compiled again.
install: $(STAMP) $(WEB_STAMP)
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

typecheck: install
	$(BIN)/mypy

## eslint, strict tsc and the Vitest component tests of the web app
web-check: $(WEB_STAMP)
	cd web && npm run lint && npx tsc -p . && npm test

## The browser of the end-to-end tests (tests/web): Debian's chromium (Playwright cannot
## download its own here)
chromium:
	@test -x /usr/bin/chromium || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

pytest: install services chromium
	$(BIN)/pytest

## Lint, strict types, then the whole suite on SQLite and PostgreSQL
test: lint typecheck web-check pytest

bench: install services
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
