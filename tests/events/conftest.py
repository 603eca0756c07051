"""Event tests drive real changes (publish, execute, runs): they use the execution fixtures (a
whole platform with workers and sandboxes over a committed temporary database)."""

from tests.execution.conftest import exec_url, platform  # noqa: F401
