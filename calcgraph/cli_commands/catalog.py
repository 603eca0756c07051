"""`calcgraph packages|functions|jobs|workflows ...`: publish, execute, create and list."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from calcgraph.cli_commands.common import (
    FAILED,
    OK,
    Context,
    add_command_on,
    add_input_options,
    closest,
    command,
    command_group,
    global_options,
    inputs_of,
    table,
)
from calcgraph.cli_commands.listing import (
    add_listing,
    add_searched_listing,
    add_time_range,
    time_cell,
)
from calcgraph.client import models as m
from calcgraph.progress import format_value

VISIBILITIES = ("private", "internal", "public")
_SUGGESTION_PAGES = 4  # at most 2,000 names are compared


def _visible(context: Context, lister: Any) -> Iterator[Any]:
    """The first pages of a listing: what the caller can see, for suggestions."""
    cursor = None
    for _ in range(_SUGGESTION_PAGES):
        page = lister(limit=500, cursor=cursor)
        yield from page.items
        cursor = page.next_cursor
        if not cursor:
            return


def suggest_workflow(context: Context, args: argparse.Namespace, detail: str) -> str | None:
    slug = getattr(args, "slug", None) or getattr(args, "workflow", None)
    if not slug or repr(slug) not in detail:
        return None
    return closest(slug, (w.slug for w in _visible(context, context.client.list_workflows)))


def suggest_function(context: Context, args: argparse.Namespace, detail: str) -> str | None:
    """`package/function`: the closest package, or the closest function of that package."""
    package, slash, rest = str(args.function).partition("/")
    name = rest.partition("@")[0]
    if not slash:
        return None
    functions = list(_visible(context, context.client.list_functions))
    if f"no package {package!r}" in detail:
        return closest(package, (f.package for f in functions))
    if f"no function {name!r}" in detail:
        found = closest(name, (f.name for f in functions if f.package == package))
        return f"{package}/{found}" if found else None
    return None


def show_report(console: Console, report: m.DeploymentReport) -> None:
    console.print(
        f"deployed [bold]{report.package}[/] {report.package_version} "
        f"(package {report.package_id})",
        highlight=False,
    )
    console.print(
        table(
            ("function", "version", "status", "endpoint"),
            ((f.name, f.version, f.status, f.endpoint) for f in report.functions),
        )
    )
    if report.dependency_closure:
        console.print(
            table(
                ("dependency", "pinned", "how"),
                (
                    (name, version, "declared" if name in report.dependencies else "brought along")
                    for name, version in report.dependency_closure.items()
                ),
            )
        )
    for warning in report.warnings:
        console.print(f"warning: {warning}", markup=False, highlight=False)


def _publish(context: Context, args: argparse.Namespace) -> int:
    report = context.client.publish_directory(args.directory, args.visibility, args.organization)
    context.emit(report, lambda: show_report(context.console, report))
    return OK


def _deploy_git(context: Context, args: argparse.Namespace) -> int:
    report = context.client.deploy_git(args.git_url, args.ref, args.visibility, args.organization)
    context.emit(report, lambda: show_report(context.console, report))
    return OK


def _diff(context: Context, args: argparse.Namespace) -> int:
    diff = context.client.diff_package(args.name, args.from_version, args.to_version)

    def human() -> None:
        context.console.print(
            f"{diff.package} {diff.from_version} -> {diff.to_version}: "
            f"{len(diff.changes)} interface change(s), "
            f"{sum(c.breaking for c in diff.changes)} breaking",
            markup=False,
            highlight=False,
        )
        if diff.changes:
            context.console.print(
                table(
                    ("function", "change", "port", "breaking", "reason"),
                    (
                        (
                            escape(c.function),
                            c.change,
                            escape(c.port or ""),
                            "yes" if c.breaking else "",
                            escape(c.reason),
                        )
                        for c in diff.changes
                    ),
                )
            )

    context.emit(diff, human)
    return OK


def show_job(console: Console, job_id: str, status: str, outputs: Any, error: Any) -> None:
    console.print(f"job {job_id} [bold]{status}[/]", highlight=False)
    if outputs:
        console.print(
            table(("output", "value"), ((k, format_value(v)) for k, v in outputs.items()))
        )
    if error:
        console.print(
            f"error: {error.get('kind')}: {error.get('message')}", markup=False, highlight=False
        )


def _execute(context: Context, args: argparse.Namespace) -> int:
    inputs = inputs_of(args)
    client = context.client
    started = time.monotonic()
    result = client.execute(args.function, inputs, wait=args.wait, refresh=args.refresh)
    for warning in result.warnings or ():
        # Contract 11: a deprecated function says so, in yellow, on stderr (stdout stays the
        # answer, JSON with --json).
        context.errors.print(Text(f"warning: {warning}", style="yellow"))
    document: Any = result
    remaining = args.wait - (time.monotonic() - started)
    if not result.done and remaining > 0:
        # The server caps its wait; the rest of `--wait` is spent polling the job.
        try:
            job = client.wait_for_job(result.job_id, timeout=remaining)
            document = m.ExecuteResult(
                job_id=job.id,
                status=job.status,
                outputs=job.outputs,
                error=job.error,
                warnings=result.warnings,
            )
        except TimeoutError:
            pass
    final: m.ExecuteResult = document
    context.emit(
        final,
        lambda: show_job(context.console, final.job_id, final.status, final.outputs, final.error),
    )
    return FAILED if final.status == "failed" else OK


def _show_job(context: Context, args: argparse.Namespace) -> int:
    job = context.client.get_job(args.job_id)
    context.emit(job, lambda: show_job(context.console, job.id, job.status, job.outputs, job.error))
    return FAILED if job.status == "failed" else OK


def _cancel_job(context: Context, args: argparse.Namespace) -> int:
    job = context.client.cancel_job(args.job_id)
    context.emit(job, lambda: show_job(context.console, job.id, job.status, job.outputs, job.error))
    return OK


def _workflow_document(path: str) -> dict[str, Any]:
    try:
        document = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError(f'{path}: expected a graph {{"nodes": [...]}} or a workflow document')
    return document


def _create_workflow(context: Context, args: argparse.Namespace) -> int:
    document = _workflow_document(args.file)
    graph = document.get("graph", document)
    slug = str(args.slug or document.get("slug") or "")
    name = str(args.name or document.get("name") or slug)
    if not slug:
        raise ValueError('name the workflow: --slug, or a document with "slug" and "graph"')
    visibility = args.visibility or document.get("visibility")
    organization = args.organization or document.get("organization")
    workflow = context.client.create_workflow(slug, name, graph, visibility, organization)
    context.emit(workflow, lambda: show_workflow(context.console, workflow))
    return OK


def show_workflow(console: Console, workflow: m.WorkflowDetail) -> None:
    console.print(
        f"workflow [bold]{workflow.slug}[/] ({workflow.name}) version {workflow.version}",
        highlight=False,
    )
    inputs = [(node.get("node_key"), node.get("type_expr")) for node in workflow.input_nodes]
    if inputs:
        console.print(table(("input", "type"), inputs))


def _show_workflow(context: Context, args: argparse.Namespace) -> int:
    workflow = context.client.get_workflow(args.slug)
    context.emit(workflow, lambda: show_workflow(context.console, workflow))
    return OK


def add_ownership_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--visibility", choices=VISIBILITIES, default=None)
    parser.add_argument("--organization", default=None, help="owning organization slug")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = [global_options()]
    packages = command_group(sub, "packages", "publish and list packages")
    publish = packages.add_parser(
        "publish", parents=common, help="publish a package directory (with calcgraph.yaml)"
    )
    publish.add_argument("directory", help="directory holding calcgraph.yaml and the modules")
    add_ownership_options(publish)
    publish.set_defaults(func=command(_publish))
    git = packages.add_parser("deploy-git", parents=common, help="deploy a git repository ref")
    git.add_argument(
        "git_url",
        metavar="URL",
        help="https:// repository URL (file:// only inside the server's CALCGRAPH_GIT_LOCAL_ROOTS)",
    )
    git.add_argument("ref", metavar="REF", help="tag, branch or commit SHA")
    add_ownership_options(git)
    git.set_defaults(func=command(_deploy_git))
    diff = packages.add_parser(
        "diff", parents=common, help="interface changes between two versions of a package"
    )
    diff.add_argument("name", metavar="NAME", help="package name or id")
    diff.add_argument("from_version", metavar="A", help="the older version")
    diff.add_argument("to_version", metavar="B", help="the newer version")
    diff.set_defaults(func=command(_diff))
    add_searched_listing(
        packages,
        "packages you can see",
        lambda client: client.list_packages,
        "only names holding this text",
        ("name", "version", "visibility", "owner", "id"),
        lambda p: (p.name, p.current_version, p.visibility, p.owner, p.id),
    )

    functions = command_group(sub, "functions", "execute and list functions")
    execute = functions.add_parser("execute", parents=common, help="run a function as a job")
    execute.add_argument(
        "function", metavar="NAME[@VERSION]", help="package/function[@version], or a function id"
    )
    add_input_options(
        execute, "an input: JSON if it parses, else a quantity like '12 kN', else text; repeatable"
    )
    execute.add_argument(
        "--wait", type=float, default=30.0, help="seconds to wait for the result (default 30)"
    )
    execute.add_argument(
        "--refresh",
        action="store_true",
        help="never answer from the result cache (the new result is stored)",
    )
    execute.set_defaults(func=command(_execute, suggest_function))
    add_searched_listing(
        functions,
        "functions you can see",
        lambda client: client.list_functions,
        "only package/name holding this text",
        ("function", "version", "id"),
        lambda f: (f"{f.package}/{f.name}", f.current_version, f.id),
    )

    jobs = command_group(sub, "jobs", "list, read and cancel jobs")
    add_command_on(jobs, "show", "a job: status, outputs, error", "job_id", _show_job)
    add_command_on(
        jobs,
        "cancel",
        "cancel a queued or running job (its sandbox is killed)",
        "job_id",
        _cancel_job,
    )
    listing = add_listing(
        jobs,
        "your jobs, newest first",
        lambda context, args: context.client.list_jobs(
            args.limit,
            args.cursor,
            args.function,
            args.status or (),
            args.created_after,
            args.created_before,
        ),
        ("job", "status", "created", "run", "node"),
        lambda j: (
            j.id,
            j.status,
            time_cell(j.created_at),
            j.workflow_run_id,
            j.node_key,
        ),
    )
    listing.add_argument("--function", default=None, help="only package/function holding this")
    listing.add_argument("--status", action="append", help="filter by status; repeatable")
    add_time_range(listing, "created")

    workflows = command_group(sub, "workflows", "create and read workflows")
    create = workflows.add_parser(
        "create", parents=common, help="create a workflow from a graph JSON file"
    )
    create.add_argument(
        "file", metavar="FILE", help='graph {"nodes": [...]} or {"slug", "name", "graph"} JSON'
    )
    create.add_argument("--slug", default=None, help="URL name (else the document's)")
    create.add_argument("--name", default=None, help="display name (else the document's)")
    add_ownership_options(create)
    create.set_defaults(func=command(_create_workflow))
    add_command_on(
        workflows,
        "show",
        "a workflow's latest version",
        "slug",
        _show_workflow,
        suggest_workflow,
        metavar="SLUG",
    )
    add_searched_listing(
        workflows,
        "workflows you can see",
        lambda client: client.list_workflows,
        "only slugs or names holding this text",
        ("slug", "name", "version", "visibility", "owner"),
        lambda w: (w.slug, w.name, w.latest_version, w.visibility, w.owner),
    )
