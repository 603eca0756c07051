"""The `calcgraph` command: serve, migrate (and the commands later features add)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from calcgraph.settings import Settings, get_settings


def _migrate(settings: Settings) -> None:
    from calcgraph.db.engine import Database
    from calcgraph.db.migrate import upgrade

    async def run() -> None:
        database = Database(settings.database_url, busy_timeout_ms=settings.sqlite_busy_timeout_ms)
        try:
            await upgrade(database)
        finally:
            await database.dispose()

    asyncio.run(run())


def cmd_migrate(args: argparse.Namespace) -> int:
    settings = get_settings()
    _migrate(settings)
    print(f"database is at the latest schema ({settings.db_driver})")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = get_settings()
    if settings.sandbox_kind == "process":
        logging.getLogger("calcgraph").warning(
            "SANDBOX IS 'process': user code runs as a plain subprocess with rlimits only; "
            "isolation is weak. Install bubblewrap (apt-get install bubblewrap) or use docker."
        )
    _migrate(settings)
    uvicorn.run(
        "calcgraph.app:create_app",
        factory=True,
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_level=settings.log_level,
        proxy_headers=True,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="calcgraph", description="calcgraph: typed engineering computations as a service"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the API (GraphQL at /graphql, REST at the root)")
    serve.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to bind (default 8000)")
    serve.set_defaults(func=cmd_serve)

    migrate = sub.add_parser("migrate", help="apply database migrations")
    migrate.set_defaults(func=cmd_migrate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except ValueError as exc:
        print(f"calcgraph: {exc}", file=sys.stderr)
        return 2
    return result
