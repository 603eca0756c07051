"""Event tests drive real changes (publish, execute, runs): they use the execution fixtures (a
whole platform with workers and sandboxes over a committed temporary database)."""

from collections.abc import Iterator

import pytest

from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import Served, serve
from tests.execution.conftest import exec_url, platform  # noqa: F401


@pytest.fixture(scope="module")
def served_hooks(
    exec_url: str,  # noqa: F811
    identity_provider: LocalIdentityProvider,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    """A real server whose webhooks may reach receivers on loopback, dispatching often."""
    with serve(
        exec_url,
        identity_provider,
        tmp_path_factory.mktemp("served-hooks"),
        webhook_allowed_hosts=["127.0.0.1"],
        webhook_dispatch_interval_seconds=0.1,
    ) as running:
        yield running
