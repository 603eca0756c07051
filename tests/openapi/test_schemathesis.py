"""Schemathesis against a real calcgraph (uvicorn over a committed database, SQLite and
PostgreSQL): cases generated from /openapi.json, sent with a valid bearer token, must never get
a 5xx, and every answer must match the document (status, content type, body schema)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from calcgraph.rest_compat.api import document
from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import Served, serve
from tests.execution.conftest import exec_url  # noqa: F401

# Bounded for a shared 2-core machine: 38 operations times this, per database (about 55 s).
MAX_EXAMPLES = 8
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzzed(
    exec_url: str,  # noqa: F811
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    tmp: Path = tmp_path_factory.mktemp("fuzzed")
    with serve(
        exec_url,
        identity_provider,
        tmp,
        rate_limit_per_minute=0,  # the fuzzer is one caller sending hundreds of requests
        build_dir=tmp / "builds",
        build_no_index=True,  # a generated requirement must not reach out to an index
        git_allowed_schemes=["https"],  # nor may a generated git_url read this host's disk
        git_clone_timeout_seconds=5,
    ) as running:
        yield running


# The document the app serves at /openapi.json (tests/openapi/test_document.py checks that),
# loaded at import: Schemathesis parametrizes at collection, and its lazy
# `schemathesis.pytest.from_fixture` fails on pytest 9 (it reads the removed `Item._nodeid`).
schema = schemathesis.openapi.from_dict(document())
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=MAX_EXAMPLES,
    deterministic=True,
    database="none",
)


@schema.parametrize()
def test_no_server_error_and_answers_match_the_document(
    case: schemathesis.Case, fuzzed: Served
) -> None:
    _bounded_wait(case)
    case.call_and_validate(
        base_url=fuzzed.url,
        headers={"Authorization": f"Bearer {fuzzed.token('alice')}"},
        checks=CHECKS,
    )


def _bounded_wait(case: schemathesis.Case) -> None:
    """A valid `wait` of the events long-poll is honoured: the answer comes after that many
    seconds when nothing happens (up to 30), past the client's 10 s read timeout. The fuzzer
    keeps its invalid values (the 422s are what it checks there); a valid one is cut to 0.5 s."""
    if case.path != "/events" or not isinstance(case.query, dict):
        return
    wait = case.query.get("wait")
    try:
        seconds = float(wait) if isinstance(wait, int | float | str) else None
    except ValueError:
        return
    if seconds is not None and 0.5 < seconds <= 30:
        case.query["wait"] = 0.5
