"""A server with more requests than pooled connections answers 503 Unavailable (retry), in
both doors, never a 500: the pool's own timeout is a retryable condition."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from graphql.error import GraphQLError
from sqlalchemy import text
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from calcgraph.db.dialect import is_retryable
from calcgraph.rest_compat.errors import error_response
from calcgraph.schema.build import build_schema
from calcgraph.schema.errors import ContractErrors


async def exhausted_pool_error(tmp_path: Path) -> PoolTimeout:
    engine = create_async_engine(
        f"sqlite+aiosqlite:///{tmp_path}/pool.db",
        poolclass=AsyncAdaptedQueuePool,
        pool_size=1,
        max_overflow=0,
        pool_timeout=0.1,
    )
    try:
        async with engine.connect() as held:
            await held.execute(text("SELECT 1"))
            with pytest.raises(PoolTimeout) as caught:
                async with engine.connect() as second:
                    await second.execute(text("SELECT 1"))
        return caught.value
    finally:
        await engine.dispose()


async def test_rest_answers_503_with_retry_after(tmp_path: Path) -> None:
    error = await exhausted_pool_error(tmp_path)
    assert is_retryable(error)
    response = error_response(error)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert json.loads(bytes(response.body))["detail"].startswith("Unavailable: ")


async def test_graphql_answers_unavailable(tmp_path: Path) -> None:
    error = await exhausted_pool_error(tmp_path)
    wrapped = GraphQLError("boom", original_error=error, path=["workflowRun"])
    (processed,) = ContractErrors()._process_errors([wrapped])
    assert processed.extensions == {"code": "Unavailable", "retry_after": 1}
    assert processed.message == "the database is busy; retry the request"
    assert processed.path == ["workflowRun"]


async def test_graphql_logs_a_busy_database_as_a_warning_not_an_unexpected_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The soak's overloaded pool (contract 8b) was logged as "unexpected GraphQL error" at
    ERROR, though the client got its `Unavailable` answer: an expected refusal, a warning."""
    busy = GraphQLError("boom", original_error=await exhausted_pool_error(tmp_path))
    broken = GraphQLError("boom", original_error=KeyError("secret"))
    with caplog.at_level(logging.WARNING, logger="calcgraph.graphql"):
        build_schema().process_errors([busy, broken])
    levels = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert ("WARNING", f"retryable database error (GraphQL): {busy.original_error}") in levels
    assert [message for level, message in levels if level == "ERROR"] == [
        "unexpected GraphQL error"
    ]


def test_an_unexpected_error_is_still_masked() -> None:
    wrapped = GraphQLError("boom", original_error=KeyError("secret"))
    (processed,) = ContractErrors()._process_errors([wrapped])
    assert processed.extensions == {"code": "InternalError"}
    assert "secret" not in processed.message
    assert error_response(KeyError("secret")).status_code == 500
