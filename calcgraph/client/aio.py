"""`AsyncClient`: the calcgraph API from asyncio code, with the methods of `Client`, awaited.

async with AsyncClient() as cg:
    run = await cg.start_run("beam-check", inputs)
    run = await cg.run_until_done(run.id)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx

from calcgraph.client import models as m
from calcgraph.client.base import ClientBase
from calcgraph.client.model_base import Model
from calcgraph.client.operations import Call, Flow, Pages, Sleep

R = TypeVar("R")
M = TypeVar("M", bound=Model)


class AsyncClient(ClientBase[httpx.AsyncClient]):
    transport = httpx.AsyncClient

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # Drivers -----------------------------------------------------------------------------

    async def send(self, call: Call[R]) -> R:
        clock = self._retry_clock()
        while True:
            try:
                response = await self._http.request(**self._request(call))
            except httpx.TransportError as exc:
                raise self._unreachable(exc) from exc
            wait = clock.delay(response)
            if wait is None:
                return self._read(call, response)
            await asyncio.sleep(wait)

    async def perform(self, step: Call[R] | Flow[R]) -> R:
        return await (self.send(step) if isinstance(step, Call) else self.drive(step))

    async def drive(self, flow: Flow[R]) -> R:
        try:
            step = next(flow)
            while True:
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                    step = flow.send(None)
                else:
                    step = flow.send(await self.send(step))
        except StopIteration as stop:
            result: R = stop.value
            return result
        finally:
            flow.close()

    async def iterate(
        self, lister: Callable[..., Awaitable[m.Page[M]]], **kwargs: Any
    ) -> AsyncIterator[M]:
        """Every item of a listing: `async for job in cg.iterate(cg.list_jobs):`."""
        cursor = kwargs.pop("cursor", None)
        while True:
            page = await lister(cursor=cursor, **kwargs)
            for item in page.items:
                yield item
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def follow(self, pages: Pages) -> AsyncIterator[Any]:
        try:
            call = next(pages)
            while True:
                page = await self.send(call)
                for item in page.items:
                    yield item
                call = pages.send(page)
        except StopIteration:
            return
        finally:
            pages.close()
