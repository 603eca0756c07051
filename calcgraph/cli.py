"""The `calcgraph` command: serve, migrate (and the commands later features add)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError as SettingsError

from calcgraph import __version__
from calcgraph.settings import Settings, get_settings


def _migrate(settings: Settings) -> None:
    from calcgraph.db.engine import Database
    from calcgraph.migrations.runner import upgrade

    async def run() -> None:
        database = Database.from_settings(settings)
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
    from calcgraph import heap

    heap.pause_until_settled()  # the application's lifespan settles the heap
    import uvicorn

    from calcgraph.ops.logs import setup_logging
    from calcgraph.serving.server import http_options, refuse_workers_without_redis

    settings = get_settings()
    refuse_workers_without_redis(settings, args.workers)
    setup_logging(settings)
    if settings.redis_url is None:  # the workers run in this process: their sandbox must hold
        from calcgraph.workers.sandbox import preflight

        preflight(settings)
    host = args.host or settings.host
    from calcgraph.auth.issuer import require_https

    require_https(settings.issuer)
    dev_idp = None
    if settings.uses_dev_identity_provider:
        from calcgraph.auth.devidp import DEV_USERS, start_for_serve

        dev_idp = start_for_serve(settings.oidc_audience, host, settings.dev_idp_port)
        logging.getLogger("calcgraph").info(
            "development identity provider at %s (%s) with users %s; "
            "`calcgraph token alice` prints a token",
            settings.issuer,
            "started" if dev_idp is not None else "already running",
            ", ".join(DEV_USERS),
        )
    try:
        _migrate(settings)
        uvicorn.run(
            "calcgraph.serving.server:create_served_app",
            factory=True,
            workers=args.workers,
            host=host,
            port=args.port or settings.port,
            log_level=settings.log_level,
            proxy_headers=True,
            **http_options(settings),
            # Logging is ours (JSON or text, with request ids); the app logs each request.
            log_config=None,
            access_log=False,
        )
    finally:
        if dev_idp is not None:
            dev_idp.stop()
    from calcgraph.serving.starting import start_failed

    return 1 if start_failed() else 0


def cmd_token(args: argparse.Namespace) -> int:
    from calcgraph.auth.devidp import dev_token
    from calcgraph.auth.issuer import is_loopback

    settings = get_settings()
    if not settings.uses_dev_identity_provider:
        raise ValueError(
            "`calcgraph token` serves the development identity provider only; with "
            "CALCGRAPH_OIDC_ISSUER set, get tokens from that identity provider"
        )
    if not is_loopback(settings.host):
        raise ValueError(f"refusing development tokens: the host {settings.host} is not loopback")
    print(dev_token(settings.issuer, args.username))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from calcgraph import heap
    from calcgraph.auth.devidp import DevIdentityProvider

    heap.pause_until_settled()  # the platform's lifespan settles the heap
    settings = get_settings()
    identity = None
    if settings.uses_dev_identity_provider:
        # Launched first: the provider's process starts while this one imports the platform.
        # Warnings only: its record of each sign-in is not the demo user's to read.
        identity = DevIdentityProvider(settings.oidc_audience, log_level="warning")
        identity.launch()
    try:
        from calcgraph.demo.run import DemoOptions, run_demo
        from calcgraph.workers.sandbox import preflight

        preflight(settings, args.sandbox)
        options = DemoOptions(
            fresh=args.fresh, as_json=args.json, sandbox=args.sandbox, timeout_seconds=args.timeout
        )
        return run_demo(settings, options, identity=identity)
    finally:
        if identity is not None:
            identity.stop()  # a no-op when the platform stopped it


def cmd_worker(args: argparse.Namespace) -> int:
    from calcgraph.ops.logs import setup_logging
    from calcgraph.workers.main import run_workers

    settings = get_settings()
    setup_logging(settings)
    return run_workers(settings, args.processes, args.threads)


def cmd_builds_cleanup(args: argparse.Namespace) -> int:
    """Registry retention now (spec: Limits); the `builds.cleanup` actor does it periodically."""
    from calcgraph.builds.retention import cleanup
    from calcgraph.db.base import utcnow
    from calcgraph.db.engine import Database

    settings = get_settings()

    async def run() -> list[str]:
        database = Database.from_settings(settings)
        try:
            report = await cleanup(database, settings, utcnow(), dry_run=args.dry_run)
        finally:
            await database.dispose()
        return report.lines()

    for line in asyncio.run(run()):
        print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from calcgraph import cli_commands

    parser = argparse.ArgumentParser(
        prog="calcgraph",
        description="calcgraph: typed engineering computations as a service",
        epilog=cli_commands.EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"calcgraph {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the API (GraphQL at /graphql, REST at the root)")
    serve.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to bind (default 8000)")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="API processes sharing the port (default 1; more than 1 needs CALCGRAPH_REDIS_URL)",
    )
    serve.set_defaults(func=cmd_serve)

    token = sub.add_parser(
        "token", help="print an access token of a development user (alice, bob, admin)"
    )
    token.add_argument("username", help="alice, bob or admin")
    token.set_defaults(func=cmd_token)

    demo = sub.add_parser(
        "demo",
        help="run the bundled beam-check workflow on an in-process platform, with its progress",
    )
    demo.add_argument(
        "--fresh",
        action="store_true",
        help="use a temporary SQLite database instead of the configured one",
    )
    # SUPPRESS: `calcgraph --json demo` (the global option) is not reset by the subcommand's.
    demo.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the final run as JSON",
    )
    demo.add_argument(
        "--sandbox",
        choices=["docker", "bwrap", "process"],
        default=None,
        help="sandbox of the demo's jobs (default: CALCGRAPH_SANDBOX, else bwrap when installed)",
    )
    demo.add_argument(
        "--timeout", type=float, default=120.0, help="give up on the run after this many seconds"
    )
    demo.set_defaults(func=cmd_demo)

    migrate = sub.add_parser("migrate", help="apply database migrations")
    migrate.set_defaults(func=cmd_migrate)

    worker = sub.add_parser(
        "worker", help="run Dramatiq workers against the Redis broker (CALCGRAPH_REDIS_URL)"
    )
    worker.add_argument("--processes", type=int, default=1, help="worker processes (default 1)")
    worker.add_argument("--threads", type=int, default=8, help="threads per process (default 8)")
    worker.set_defaults(func=cmd_worker)

    builds = sub.add_parser("builds", help="function images and artifacts")
    builds_sub = builds.add_subparsers(dest="builds_command", required=True)
    cleanup = builds_sub.add_parser(
        "cleanup", help="delete images and artifacts past retention (90 days, 10 versions)"
    )
    cleanup.add_argument("--dry-run", action="store_true", help="list, delete nothing")
    cleanup.set_defaults(func=cmd_builds_cleanup)
    cli_commands.register(parser, sub)
    return parser


def describe_settings_error(error: SettingsError) -> str:
    """A bad setting named as the operator wrote it: the variable, not the field."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    lines = []
    for problem in error.errors():
        field = str(problem["loc"][0]) if problem["loc"] else ""
        variable = f"{prefix}{field}".upper()
        message = str(problem["msg"]).removeprefix("Value error, ")
        if message.startswith(variable):  # a validator that already names the variable
            lines.append(message)
        else:
            lines.append(f"{variable}={problem.get('input')!s}: {message}")
    return "bad setting: " + "; ".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    # Warnings only until a command sets up its own logging (serve and worker do): a client
    # command prints its answer, never the HTTP library's request lines.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except SettingsError as exc:
        print(f"calcgraph: {describe_settings_error(exc)}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"calcgraph: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from calcgraph.workers.sandbox import SandboxUnavailable

        if not isinstance(exc, SandboxUnavailable):
            raise
        print(f"calcgraph: refusing to start: {exc}", file=sys.stderr)
        return 2
    return result
