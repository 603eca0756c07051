"""Each REST operation is declared once, by a decorator on its handler: method, path, answers
(a response model per status) and the contract errors it can give; the handler's docstring
opens with its summary, and its `Call[Body, Query]` annotation names the request models.
From that one declaration come the Starlette route, the parsing (calcgraph.rest_compat.parsing),
the serialisation of what the handler returns (through its response model) and the OpenAPI
entry (rest_compat.openapi).

    rest = Operations(tag="runs")

    @rest("POST", "/workflows/{slug}/runs", {201: RunOut}, errors=(403,))
    async def create_run(call: Call[CreateRunBody, None]) -> RunView:
        '''Start a run'''
        ...
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import (
    Any,
    Generic,
    TypeVar,
    get_args,
    get_origin,
    get_type_hints,
)

from pydantic import BaseModel, TypeAdapter
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from calcgraph.auth.authenticate import PUBLIC_ROUTES, require_principal
from calcgraph.db.engine import Database, wants_one_snapshot
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.spend import off_loop
from calcgraph.rest_compat.parsing import Query, parse_body, parse_query
from calcgraph.rest_compat.state import database_of, services_of
from calcgraph.services import P, R, Services, StagedUseCase, UseCase

LARGE_ANSWER_BYTES = 1024 * 1024
"""A listing page whose values take more is serialised on a thread, not the event loop."""
B = TypeVar("B")
Q = TypeVar("Q")

# A success answer: a response model, or a media type for a non-JSON body (logs, pages) that
# the handler returns as a Response, or None for an empty body (204).
Answer = type[BaseModel] | str | None
Handler = Callable[["Call[Any, Any]"], Awaitable[object]]
H = TypeVar("H", bound=Handler)


@dataclass(frozen=True)
class Call(Generic[B, Q]):
    """What a handler gets: the parsed body and query (None where the operation has none)."""

    request: Request
    body: B
    query: Q

    @property
    def principal(self) -> Principal:
        return require_principal(self.request)

    @property
    def database(self) -> Database:
        return database_of(self.request)

    @property
    def services(self) -> Services:
        """What the application offers the doors (`calcgraph.services`)."""
        return services_of(self.request)

    def path(self, name: str) -> str:
        value: str = self.request.path_params[name]
        return value

    async def read(self, use_case: UseCase[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """A service use case on the caller's behalf, in one read-only unit of work."""
        async with self.database.read_session(snapshot=wants_one_snapshot(use_case)) as session:
            return await use_case(session, self.principal, *args, **kwargs)

    async def write(self, use_case: UseCase[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """A service use case on the caller's behalf, in one unit of work committed before the
        answer is written (its jobs leave after the commit)."""
        async with self.database.write_session() as session:
            return await use_case(session, self.principal, *args, **kwargs)

    async def staged(self, use_case: StagedUseCase[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """A service use case that opens its own units of work: reads, then work holding no
        connection, then one write transaction (`calcgraph.services.StagedUseCase`)."""
        return await use_case(self.database, self.principal, *args, **kwargs)


@dataclass(frozen=True)
class Reply:
    """A handler's answer when the operation declares more than one status (200 or 202)."""

    status: int
    value: object
    headers: Mapping[str, str] = field(default_factory=dict)
    """Response headers beyond those of the JSON body."""


def serialiser(model: type[BaseModel]) -> Callable[[object], bytes]:
    """What writes a value as `model`'s JSON: what an operation answering `model` does."""
    return _serialiser(model)


async def written(value: object, serialise: Callable[[object], bytes]) -> bytes:
    """`serialise(value)`, off the event loop when the value is large (its `size_hint`)."""
    if getattr(value, "size_hint", 0) > LARGE_ANSWER_BYTES:
        return await off_loop(serialise, value)
    return serialise(value)


def _serialiser(model: type[BaseModel]) -> Callable[[object], bytes]:
    # The response models read the domain's views by attribute (see wire.py); pydantic
    # validates and writes JSON in Rust, which is faster than building dicts for json.dumps.
    adapter = TypeAdapter(model)

    def serialise(value: object) -> bytes:
        return adapter.dump_json(adapter.validate_python(value, from_attributes=True))

    return serialise


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    answers: Mapping[int, Answer]
    handler: Handler
    body: type[BaseModel] | None = None
    body_required: bool = True
    """False: an empty body is the body model's defaults (execute: no inputs)."""
    query: type[Query] | None = None
    errors: tuple[int, ...] = ()
    """Contract statuses beyond those every route can give (see openapi.COMMON_ERRORS) and those
    its shape implies (404 with a path parameter, 422 with a body or query, 401 unless public)."""
    tag: str = ""
    _serialisers: dict[int, Callable[[object], bytes]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for status, answer in self.answers.items():
            if isinstance(answer, type):
                self._serialisers[status] = _serialiser(answer)

    @property
    def public(self) -> bool:
        return (self.method, self.path) in PUBLIC_ROUTES

    @property
    def success(self) -> int:
        return min(self.answers)

    def route(self) -> Route:
        return Route(self.path, self.endpoint, methods=[self.method], name=self.handler.__name__)

    async def endpoint(self, request: Request) -> Response:
        query = None if self.query is None else parse_query(request.query_params, self.query)
        body = (
            None
            if self.body is None
            else await parse_body(request, self.body, required=self.body_required)
        )
        result = await self.handler(Call(request, body, query))
        if getattr(result, "size_hint", 0) > LARGE_ANSWER_BYTES:
            # Contract 8b: a large answer is written off the event loop (/health meanwhile).
            return await off_loop(self.respond, result)
        return self.respond(result)

    def respond(self, result: object) -> Response:
        if isinstance(result, Response):
            return result
        status, value = (
            (result.status, result.value) if isinstance(result, Reply) else (self.success, result)
        )
        headers = result.headers if isinstance(result, Reply) else None
        if self.answers[status] is None:
            return Response(status_code=status, headers=headers)
        serialise = self._serialisers.get(status)
        if serialise is None:
            raise TypeError(f"{self.method} {self.path}: a {status} answer is a Response")
        return Response(
            serialise(value), status_code=status, media_type="application/json", headers=headers
        )


def _request_models(handler: Handler) -> tuple[Any, Any]:
    """The Body and Query of the handler's `Call[Body, Query]` parameter (None: none)."""
    first = next(iter(inspect.signature(handler).parameters))
    hint = get_type_hints(handler)[first]
    if get_origin(hint) is not Call:
        raise TypeError(f"{handler.__name__}: annotate its parameter as Call[Body, Query]")
    body, query = get_args(hint)
    return (None if body is type(None) else body), (None if query is type(None) else query)


def _summary(handler: Handler) -> str:
    """The first paragraph of the handler's docstring, on one line."""
    doc = inspect.getdoc(handler)
    if not doc:
        raise TypeError(f"{handler.__name__}: open its docstring with the operation's summary")
    return " ".join(doc.split("\n\n", 1)[0].split())


class Operations:
    """The operations of one routes module, in the order they are declared (the order of the
    routes and of the OpenAPI paths)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.declared: list[Operation] = []

    def __call__(
        self,
        method: str,
        path: str,
        answers: Mapping[int, Answer],
        *,
        errors: tuple[int, ...] = (),
        tag: str | None = None,
        body_required: bool = True,
    ) -> Callable[[H], H]:
        def declare(handler: H) -> H:
            body, query = _request_models(handler)
            self.declared.append(
                Operation(
                    method,
                    path,
                    _summary(handler),
                    answers,
                    handler,
                    body=body,
                    body_required=body_required,
                    query=query,
                    errors=errors,
                    tag=self.tag if tag is None else tag,
                )
            )
            return handler

        return declare
