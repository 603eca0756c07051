# The two commands of a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8000

.PHONY: install run serve test services sandbox lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

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

pytest: install services
	$(BIN)/pytest

## Lint, strict types, then the whole suite on SQLite and PostgreSQL
test: lint typecheck pytest

bench: install services
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
