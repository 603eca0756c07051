"""The ASGI GraphQL endpoint, with our typed context."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

import pydantic_core
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.types import ExecutionResult

from calcgraph import webui
from calcgraph.auth.authenticate import current_principal
from calcgraph.domain import json_limits
from calcgraph.domain.errors import ValidationError
from calcgraph.domain.spend import off_loop
from calcgraph.ops.socket_census import SocketCensus, build_census
from calcgraph.schema.access_loaders import AccessLoaders
from calcgraph.schema.build import build_schema
from calcgraph.schema.context import Context
from calcgraph.schema.document_cache import REFUSED_KEY, refusals_of
from calcgraph.schema.websocket import AuthenticatedTransportWS
from calcgraph.services import Services

if TYPE_CHECKING:  # strawberry's request adapter, from its own dependency
    from cross_web import AsyncHTTPRequestAdapter

LARGE_ANSWER_BYTES = 1024 * 1024
"""An operation estimated to answer more is written on a thread, not the event loop."""


class _Encoded(dict[str, object]):
    """An answer already written as JSON (off the event loop); `encode_json` passes it on."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class GraphQLView(GraphQL[Context, None]):
    graphql_transport_ws_handler_class = AuthenticatedTransportWS

    def __init__(
        self, services: Services, sockets: SocketCensus | None = None, **kwargs: Any
    ) -> None:
        settings = services.settings
        super().__init__(
            build_schema(settings),
            graphql_ide="graphiql" if settings.graphql_ide else None,
            # Cross-origin WebSocket handshakes: the same origins CORS lets call the API.
            allowed_origins=settings.cors_origin_list,
            connection_init_wait_timeout=timedelta(seconds=settings.limit_socket_init_seconds),
            **kwargs,
        )
        self.sockets = sockets if sockets is not None else build_census(settings)
        """Open sockets, counted across every serve process when Redis is configured."""
        self.services = services
        self.database = services.database
        self.refusals = refusals_of(list(getattr(self.schema, "extensions", ())))

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        """A text refused before execution is answered again from its first refusal, without
        being parsed or validated again (schema.document_cache.Refusals): refusing a hostile
        document over and over costs a lookup, not the event loop's time."""
        query = request_data.query
        if self.refusals is None or not query:
            return await super().execute_single(
                request, request_adapter, sub_response, context, root_value, request_data
            )
        key = self.refusals.key(query, request_data.operation_name, request_adapter.method)
        refused = self.refusals.get(key)
        if refused is not None:
            return ExecutionResult(data=None, errors=refused)
        result = await super().execute_single(
            request, request_adapter, sub_response, context, root_value, request_data
        )
        state = getattr(request, "state", None)
        if result.errors and getattr(state, REFUSED_KEY, None) is query:
            self.refusals.put(key, result.errors)
        return result

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        data = await super().process_result(request, result)
        large = getattr(request.state, "answer_estimate", 0) > LARGE_ANSWER_BYTES
        if large and isinstance(request, Request):  # HTTP answers; socket messages as they are
            # Contract 8b: a large answer is written off the event loop (/health meanwhile).
            text = await off_loop(self.encode_json, data)
            return cast(GraphQLHTTPResponse, _Encoded(text))
        return data

    def encode_json(self, data: object) -> str:
        if isinstance(data, _Encoded):
            return data.text
        # A whole 10,000-node run answers 2 MB: pydantic-core writes it in Rust several times
        # faster than json.dumps (the same JSON, unescaped UTF-8 instead of \u escapes). Text,
        # not bytes: WebSocket messages must go out as text frames. Anything it refuses (a lone
        # surrogate) goes to strawberry's json.dumps, which answered it before.
        try:
            return pydantic_core.to_json(data).decode()
        except (pydantic_core.PydanticSerializationError, ValueError):
            return str(super().encode_json(data))

    def parse_json(self, data: str | bytes) -> Any:
        # HTTP bodies and query parameters: the contract's bounds answer 422 like the REST
        # door's (the error reaches the error middleware); text that is not JSON stays 400.
        try:
            return json_limits.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise json.JSONDecodeError(str(exc), "", 0) from None

    def decode_json(self, data: str | bytes) -> object:
        # WebSocket messages: a message the bounds refuse is one the protocol cannot read, so
        # strawberry closes the socket with 4400 as for any other unreadable message.
        try:
            return json_limits.loads(data)
        except (ValidationError, UnicodeDecodeError) as exc:
            raise json.JSONDecodeError(str(exc), "", 0) from None

    async def render_graphql_ide(self, request: Request) -> Response:
        # Our own build of GraphiQL (calcgraph/webui, contract 4b), not strawberry's CDN page.
        return webui.graphiql_page()

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        principal = current_principal(request)
        return Context(
            request=request,
            response=response if isinstance(response, Response) else None,
            services=self.services,
            principal=principal,
            access_loaders=(
                AccessLoaders.build(self.database, principal) if principal is not None else None
            ),
        )
