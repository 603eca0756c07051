"""The typed GraphQL context, built once per request."""

from __future__ import annotations

from dataclasses import dataclass

import strawberry
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from calcgraph.db.engine import Database
from calcgraph.settings import Settings


@dataclass
class Context:
    request: Request | WebSocket
    response: Response | None
    database: Database
    settings: Settings


Info = strawberry.Info[Context, None]
