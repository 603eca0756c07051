"""Tenant-safety tests drive a whole platform: the execution fixtures."""

from tests.execution.conftest import exec_url, platform  # noqa: F401
