"""A client that leaves while its subscription sends is not a server error: strawberry logs any
failure of an operation's task as "Exception in worker task" with a traceback, and a page
closed mid-stream made one for every socket (seen in the web benchmark's server log)."""

from __future__ import annotations

import logging

import pytest
from strawberry.http.exceptions import WebSocketDisconnected

from calcgraph.schema.websocket import AuthenticatedTransportWS


def _handler() -> AuthenticatedTransportWS:
    # Only the task-failure hook is exercised: it needs no socket, view or schema.
    return object.__new__(AuthenticatedTransportWS)


async def test_a_client_gone_mid_stream_logs_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="strawberry")
    await _handler().handle_task_exception(WebSocketDisconnected())
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_any_other_failure_of_an_operation_is_still_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="strawberry")
    try:
        raise RuntimeError("a resolver broke")
    except RuntimeError as exc:
        await _handler().handle_task_exception(exc)
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(logged) == 1
    assert logged[0].exc_info is not None
    assert "a resolver broke" in str(logged[0].exc_info[1])
