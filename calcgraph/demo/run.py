"""`calcgraph demo`: the main job on the embedded default, in one command.

It starts the platform in this process (uvicorn on a free loopback port, in-process workers,
a development identity provider), then acts as any client would, over HTTP as `alice`:
publishes the bundled package, creates (or reuses) the demo workflow, starts a run with the
demo inputs, drives it with long-poll ticks while showing its progress, and prints the
terminal outputs. The configured database is used, so the demo can run again and again on
the same one: an already published demo version and an unchanged workflow are reused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from sqlalchemy.engine import make_url

from calcgraph.auth.devidp import DevIdentityProvider
from calcgraph.client import CalcgraphError, Client, Conflict, NotFound
from calcgraph.demo import DEMO_INPUTS, package_files, workflow_document
from calcgraph.demo.platform import InProcessPlatform, PlatformError
from calcgraph.ops.units import build_unit_registry
from calcgraph.progress import OUTPUT_UNITS_QUERY, RunProgress, output_units
from calcgraph.settings import SandboxKind, Settings

WORKFLOW_SLUG = "beam-check"
WORKFLOW_NAME = "Beam check"
USERNAME = "alice"


@dataclass(frozen=True)
class DemoOptions:
    fresh: bool = False
    """A temporary SQLite database, removed at the end, instead of the configured one."""
    as_json: bool = False
    """The final run as JSON on stdout (the progress goes to stderr)."""
    sandbox: SandboxKind | None = None
    timeout_seconds: float = 120.0


def run_demo(
    settings: Settings,
    options: DemoOptions,
    stdout: Console | None = None,
    identity: DevIdentityProvider | None = None,
) -> int:
    """0 when the run completed, 1 when it failed or did not finish in time. `identity`: the
    development identity provider, already launched (the platform stops it)."""
    if not settings.uses_dev_identity_provider:
        raise ValueError(
            "calcgraph demo signs in as the development user alice, which needs the "
            "development identity provider; unset CALCGRAPH_OIDC_ISSUER to run it"
        )
    out = stdout or Console(highlight=False, soft_wrap=True)
    # With --json, stdout carries the JSON only: everything for people goes to stderr.
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    shown = err if options.as_json else out
    with _database(settings, options.fresh) as database_url, _quiet_logs():
        settings = settings.model_copy(
            update={
                "database_url": database_url,
                # An in-process platform: its own workers, whatever broker is configured.
                "redis_url": None,
                "sandbox": options.sandbox or settings.sandbox,
            }
        )
        shown.print(
            f"calcgraph demo on {_safe(database_url)}, {settings.sandbox_kind} sandbox, "
            "in-process workers"
        )
        # The demo's inputs carry units: the platform converts them with pint, whose import
        # and registry cost about half a second (a fifth once the definitions are cached).
        # Built now, in a thread of this process (the platform's), it is ready by the time
        # the run starts instead of delaying it.
        threading.Thread(
            target=build_unit_registry, name="calcgraph-demo-units", daemon=True
        ).start()
        try:
            with InProcessPlatform(settings, identity, users=(USERNAME,)) as platform:
                shown.print(f"platform at {platform.base_url}, signed in as {USERNAME}")
                with Client(platform.base_url, platform.token(USERNAME)) as client:
                    _publish(client, shown)
                    _workflow(client, shown)
                    run = _run(client, shown, options.timeout_seconds)
        except (CalcgraphError, PlatformError, TimeoutError) as exc:
            err.print(f"calcgraph demo: {exc}", markup=False)
            return 1
    if options.as_json:
        out.print_json(json.dumps(run))
    return 0 if run.get("status") == "completed" else 1


@contextlib.contextmanager
def _database(settings: Settings, fresh: bool) -> Iterator[str]:
    if not fresh:
        yield settings.database_url
        return
    with tempfile.TemporaryDirectory(prefix="calcgraph-demo-") as directory:
        yield f"sqlite+aiosqlite:///{Path(directory) / 'calcgraph.db'}"


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """Startup chatter (workers ready, migrations) would tear the live table; warnings stay,
    among them the `process` sandbox's one loud line about its weak isolation."""
    names = ("calcgraph", "dramatiq", "alembic", "httpx", "httpcore")
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _safe(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def _publish(client: Client, console: Console) -> None:
    files = package_files()
    manifest: dict[str, Any] = yaml.safe_load(files.pop("calcgraph.yaml"))
    package = manifest["package"]
    label = f"package {package['name']} {package['version']}"
    try:
        client.publish_package(manifest, files)
    except Conflict as exc:
        # Contract 2: a version that exists is a 409 Conflict naming it; that is this very
        # package, published by an earlier demo, so reuse it.
        if "already exists" not in exc.detail:
            raise
        console.print(f"{label}: already published, reusing it")
        return
    console.print(f"{label}: published")


def _workflow(client: Client, console: Console) -> None:
    graph = workflow_document()
    try:
        existing = client.get_workflow(WORKFLOW_SLUG)
    except NotFound:
        created = client.create_workflow(WORKFLOW_SLUG, WORKFLOW_NAME, graph)
        console.print(f"workflow {WORKFLOW_SLUG} v{created.version}: created")
        return
    if existing.graph == graph:
        console.print(f"workflow {WORKFLOW_SLUG} v{existing.version}: unchanged, reusing it")
        return
    updated = client.update_workflow(WORKFLOW_SLUG, graph)
    console.print(f"workflow {WORKFLOW_SLUG} v{updated.version}: updated")


def _run(client: Client, console: Console, timeout_seconds: float) -> dict[str, Any]:
    started = client.start_run(WORKFLOW_SLUG, DEMO_INPUTS)
    console.print("inputs: " + ", ".join(f"{k}={_quantity(v)}" for k, v in DEMO_INPUTS.items()))
    units = output_units(client.graphql(OUTPUT_UNITS_QUERY, {"id": started.id}).get("data") or {})
    with RunProgress(
        console,
        units=units,
        title=WORKFLOW_SLUG,
        cache_lookup=lambda job_id: client.get_job(job_id).cache_hit,
        show_computed=True,
    ) as progress:
        progress.update(started.model_dump(mode="json"))
        # Long-poll ticks: each waits on the server until a job of the run finishes.
        final = client.run_until_done(
            started.id,
            on_update=lambda run: progress.update(run.model_dump(mode="json")),
            timeout=timeout_seconds,
        )
        run: dict[str, Any] = final.model_dump(mode="json")
        progress.finish(run)
    return run


def _quantity(value: Any) -> str:
    if isinstance(value, dict) and "value" in value:
        return f"{value['value']} {value.get('unit', '')}".strip()
    return str(value)
