"""What every REST route reads from the application: its services (`calcgraph.services`), through
this one typed accessor."""

from __future__ import annotations

from starlette.requests import Request

from calcgraph.db.engine import Database
from calcgraph.services import Services
from calcgraph.services import services_of as _of_app


def services_of(request: Request) -> Services:
    return _of_app(request.app)


def database_of(request: Request) -> Database:
    return services_of(request).database
