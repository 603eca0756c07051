"""What the sync and async clients share: connection settings, request building, reading
answers and errors, and their methods, each declared once (`Method`). Only sending (and
sleeping) differs between them."""

from __future__ import annotations

import email.utils
import functools
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

import httpx

from calcgraph import __version__
from calcgraph.client import models as m
from calcgraph.client import operations as ops
from calcgraph.client import operations_events as events_ops
from calcgraph.client import operations_runs as runs_ops
from calcgraph.client.errors import CalcgraphError, ConnectionError, error_from_response
from calcgraph.client.operations import Call, Flow, Pages
from calcgraph.client.settings import ClientSettings, resolve

if TYPE_CHECKING:
    from calcgraph.client.aio import AsyncClient
    from calcgraph.client.sync import Client

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
H = TypeVar("H", httpx.Client, httpx.AsyncClient)
DEFAULT_TIMEOUT = 30.0
# 429 (rate limited) and 503 (busy, e.g. the database) are answered before anything was
# done: the same request is retried after the server's Retry-After, a few times, within a
# total budget, so a script driving many calls rides out a burst instead of failing.
RETRY_STATUSES = frozenset({429, 503})
DEFAULT_RETRIES = 4
DEFAULT_RETRY_BUDGET = 60.0
_BACKOFF_START, _BACKOFF_MAX = 0.5, 8.0


def retry_after_seconds(response: httpx.Response) -> float | None:
    """`Retry-After` in seconds: delta-seconds or an HTTP date; None when absent or bad."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


class RetryClock:
    """One call's retries: how long to wait before the next attempt, or None to give up."""

    def __init__(self, retries: int, budget: float) -> None:
        self.retries = retries
        self.budget = budget
        self.attempt = 0
        self.started = time.monotonic()

    def delay(self, response: httpx.Response) -> float | None:
        if response.status_code not in RETRY_STATUSES or self.attempt >= self.retries:
            return None
        wait = retry_after_seconds(response)
        if wait is None:
            wait = min(_BACKOFF_START * 2**self.attempt, _BACKOFF_MAX)
        if time.monotonic() - self.started + wait > self.budget:
            return None  # the server asks for longer than the caller allows: answer now
        self.attempt += 1
        return wait


def _bound(operation: Callable[P, Any], drive: Callable[[Any], Any]) -> Callable[P, Any]:
    """The client method of `operation` (named and documented as it is): what `drive` makes of
    the call, flow or pages the operation returns."""

    @functools.wraps(operation)
    def method(*args: P.args, **kwargs: P.kwargs) -> Any:
        return drive(operation(*args, **kwargs))

    return method


class Method(Generic[P, R]):
    """A call or flow of `operations` as a method of both clients, with its parameters:
    `Client` performs it and answers R, `AsyncClient` answers an awaitable of R."""

    def __init__(self, step: Callable[P, Call[R] | Flow[R]]) -> None:
        self.step = step

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Method[P, R]: ...
    @overload
    def __get__(self, client: Client, owner: type[Any]) -> Callable[P, R]: ...
    @overload
    def __get__(
        self, client: AsyncClient, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, client: ClientBase[Any] | None, owner: type[Any]) -> Any:
        return self if client is None else _bound(self.step, client.perform)


class Following(Generic[P, T]):
    """An endless listing of `operations` (`Pages`) as a method of both clients, with its
    parameters: `Client` answers an iterator of its items, `AsyncClient` an async one. `item`
    is the items' type, for the type checker."""

    def __init__(self, pages: Callable[P, Pages], item: type[T]) -> None:
        self.pages = pages

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Following[P, T]: ...
    @overload
    def __get__(self, client: Client, owner: type[Any]) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(self, client: AsyncClient, owner: type[Any]) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, client: ClientBase[Any] | None, owner: type[Any]) -> Any:
        return self if client is None else _bound(self.pages, client.follow)


class ClientBase(Generic[H]):
    transport: type[H]
    """`httpx.Client` or `httpx.AsyncClient`: how this client sends."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        settings: ClientSettings | None = None,
        retries: int = DEFAULT_RETRIES,
        retry_budget: float = DEFAULT_RETRY_BUDGET,
    ) -> None:
        """`retries` and `retry_budget` (seconds) bound the retries of a call answered 429
        or 503; `retries=0` raises `RateLimited`/`Unavailable` at once."""
        connection = resolve(url, token, settings)
        self.url = connection.url
        self.token = connection.token
        self.timeout = timeout
        self.retries = retries
        self.retry_budget = retry_budget
        self._http: H = self.transport(base_url=self.url)

    def _retry_clock(self) -> RetryClock:
        return RetryClock(self.retries, self.retry_budget)

    def __repr__(self) -> str:
        signed = "with a token" if self.token else "without a token"
        return f"<{type(self).__name__} {self.url} {signed}>"

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": f"calcgraph-client/{__version__}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _request(self, call: Call[Any]) -> dict[str, Any]:
        """Keyword arguments of `httpx.(Async)Client.request` for one call."""
        request: dict[str, Any] = {
            "method": call.method,
            "url": call.path,
            "params": list(call.params),
            "headers": self._headers(),
            # A long-poll is held by the server on purpose: it must not time out meanwhile.
            "timeout": httpx.Timeout(self.timeout + call.holds, connect=min(self.timeout, 10.0)),
        }
        if call.json is not None:
            request["json"] = call.json
        return request

    def _read(self, call: Call[R], response: httpx.Response) -> R:
        if response.is_error:
            raise error_from_response(response)
        try:
            body = response.json() if response.content else None
        except ValueError:
            raise CalcgraphError(
                f"the server answered {call.method} {call.path} with something other than JSON",
                status=response.status_code,
            ) from None
        return call.parse(body)

    def _unreachable(self, exc: httpx.TransportError) -> ConnectionError:
        reason = str(exc) or type(exc).__name__
        return ConnectionError(f"ConnectionError: cannot reach calcgraph at {self.url}: {reason}")

    def perform(self, step: Call[R] | Flow[R]) -> Any:
        """Send a call or drive a flow: R from `Client`, an awaitable of R from `AsyncClient`."""
        raise NotImplementedError

    def follow(self, pages: Pages) -> Any:
        """The items of every page of `pages`: an iterator from `Client`, an async one from
        `AsyncClient`."""
        raise NotImplementedError

    # Service and identity ----------------------------------------------------------------

    health = Method(ops.health)
    check_connection = Method(ops.check_connection)
    list_types = Method(ops.list_types)
    graphql = Method(ops.graphql)
    me = Method(ops.me)
    login_start = Method(ops.login_start)
    login_complete = Method(ops.login_complete)

    # Organizations -----------------------------------------------------------------------

    create_organization = Method(ops.create_organization)
    get_organization = Method(ops.get_organization)
    add_member = Method(ops.add_member)
    remove_member = Method(ops.remove_member)
    usage = Method(ops.usage)

    # Packages, functions, jobs -----------------------------------------------------------

    publish_package = Method(ops.publish_package)
    publish_directory = Method(ops.publish_directory)
    deploy_git = Method(ops.deploy_git)
    list_packages = Method(ops.list_packages)
    get_package = Method(ops.get_package)
    diff_package = Method(ops.diff_package)
    list_functions = Method(ops.list_functions)
    get_function = Method(ops.get_function)
    execute = Method(ops.execute)
    list_jobs = Method(ops.list_jobs)
    get_job = Method(ops.get_job)
    wait_for_job = Method(ops.wait_for_job)
    cancel_job = Method(ops.cancel_job)

    # Workflows and runs ------------------------------------------------------------------

    create_workflow = Method(runs_ops.create_workflow)
    update_workflow = Method(runs_ops.update_workflow)
    validate_workflow = Method(runs_ops.validate_workflow)
    get_workflow = Method(runs_ops.get_workflow)
    list_workflows = Method(runs_ops.list_workflows)
    start_run = Method(runs_ops.start_run)
    list_runs = Method(runs_ops.list_runs)
    get_run = Method(runs_ops.get_run)
    get_run_plan = Method(runs_ops.get_run_plan)
    tick = Method(runs_ops.tick)
    cancel_run = Method(runs_ops.cancel_run)
    rerun = Method(runs_ops.rerun)
    run_until_done = Method(runs_ops.run_until_done)

    # Events and webhooks (contract section 9) ----------------------------------------------

    events_page = Method(events_ops.events)
    events = Following(events_ops.follow_events, m.Event)
    create_webhook = Method(events_ops.create_webhook)
    list_webhooks = Method(events_ops.list_webhooks)
    get_webhook = Method(events_ops.get_webhook)
    update_webhook = Method(events_ops.update_webhook)
    delete_webhook = Method(events_ops.delete_webhook)
    test_webhook = Method(events_ops.test_webhook)
    webhook_deliveries = Method(events_ops.webhook_deliveries)
