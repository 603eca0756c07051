"""The browser door's tests use the same real server as the tenancy tests."""

from tests.execution.conftest import exec_url  # noqa: F401
from tests.tenancy.conftest import served  # noqa: F401
