"""A real calcgraph on loopback (uvicorn with the protocol `calcgraph serve` runs) for the
tests that need real sockets: header limits and WebSockets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import Served, serve
from tests.execution.conftest import any_sandbox_platform, exec_url, platform  # noqa: F401
from tests.sandbox.conftest import (  # noqa: F401
    _close_backends,
    limits,
    make_code,
    run,
    sandbox_backend,
)


@pytest.fixture(scope="module")
def served(
    exec_url: str,  # noqa: F811
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    with serve(
        exec_url,
        identity_provider,
        tmp_path_factory.mktemp("served"),
        cors_origins="https://dash.example.com",
    ) as running:
        yield running
