"""`Client`: the calcgraph API from synchronous Python (scripts, notebooks, the CLI).

    from calcgraph.client import Client, quantity

    with Client() as cg:            # URL and token: arguments, environment, `calcgraph login`
        run = cg.start_run("beam-check", {"span": quantity(3, "m"), ...})
        run = cg.run_until_done(run.id, on_update=lambda r: print(r.status))
        print(run.terminal_outputs)

Every method is one call or flow of `calcgraph.client.operations` (or of a sibling by
feature); `AsyncClient` has the same methods, awaited.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx

from calcgraph.client import models as m
from calcgraph.client.base import ClientBase
from calcgraph.client.model_base import Model
from calcgraph.client.operations import Call, Flow, Pages, Sleep

R = TypeVar("R")
M = TypeVar("M", bound=Model)


class Client(ClientBase[httpx.Client]):
    transport = httpx.Client

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Drivers -----------------------------------------------------------------------------

    def send(self, call: Call[R]) -> R:
        clock = self._retry_clock()
        while True:
            try:
                response = self._http.request(**self._request(call))
            except httpx.TransportError as exc:
                raise self._unreachable(exc) from exc
            wait = clock.delay(response)
            if wait is None:
                return self._read(call, response)
            time.sleep(wait)

    def perform(self, step: Call[R] | Flow[R]) -> R:
        return self.send(step) if isinstance(step, Call) else self.drive(step)

    def drive(self, flow: Flow[R]) -> R:
        try:
            step = next(flow)
            while True:
                if isinstance(step, Sleep):
                    time.sleep(step.seconds)
                    step = flow.send(None)
                else:
                    step = flow.send(self.send(step))
        except StopIteration as stop:
            result: R = stop.value
            return result
        finally:
            flow.close()

    def iterate(self, lister: Callable[..., m.Page[M]], **kwargs: Any) -> Iterator[M]:
        """Every item of a listing, page after page: `iterate(cg.list_jobs, limit=100)`."""
        cursor = kwargs.pop("cursor", None)
        while True:
            page = lister(cursor=cursor, **kwargs)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def follow(self, pages: Pages) -> Iterator[Any]:
        try:
            call = next(pages)
            while True:
                page = self.send(call)
                yield from page.items
                call = pages.send(page)
        except StopIteration:
            return
        finally:
            pages.close()
