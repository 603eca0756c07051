"""`tasks.stop`, how every helper's background task ends on close: it ends whatever the task
does with its cancellation, and closing never waits forever."""

from __future__ import annotations

import asyncio
import logging

import pytest

from calcgraph.ops import tasks


async def test_a_task_that_ends_when_cancelled_is_stopped() -> None:
    task = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)
    await tasks.stop(task)
    assert task.cancelled()


async def test_a_task_that_swallows_its_cancellation_is_cancelled_again() -> None:
    """As a subscriber looping over reads with a timeout does when the cancellation comes as
    the timeout expires (`asyncio.timeout` before Python 3.11.3 turns it into TimeoutError)."""
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if swallowed == 2:
                    raise
                swallowed += 1
                asyncio.current_task().uncancel()  # type: ignore[union-attr]

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await tasks.stop(task, recancel=0.01)
    assert task.cancelled()
    assert swallowed == 2


async def test_a_task_that_never_ends_is_left_with_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = asyncio.Event()

    async def deaf() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(deaf(), name="deaf")
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="calcgraph.ops"):
        await tasks.stop(task, recancel=0.01, within=0.1)
    assert not task.done()
    assert "deaf" in caplog.text
    assert "left running" in caplog.text
    release.set()
    await task


async def test_a_failed_task_ends_quietly() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    await tasks.stop(task)
    assert isinstance(task.exception(), RuntimeError)
