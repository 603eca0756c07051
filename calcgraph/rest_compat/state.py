"""What every REST route reads from the application: its database handle."""

from __future__ import annotations

from starlette.requests import Request

from calcgraph.db.engine import Database


def database_of(request: Request) -> Database:
    database: Database = request.app.state.database
    return database
