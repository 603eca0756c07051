"""`calcgraph runs start|show|list|cancel|rerun`: a run with its live progress until it ends."""

from __future__ import annotations

import argparse

from rich.console import Console

from calcgraph.cli_commands.catalog import suggest_workflow
from calcgraph.cli_commands.common import (
    FAILED,
    OK,
    Context,
    add_command_on,
    add_input_options,
    command,
    command_group,
    global_options,
    inputs_of,
)
from calcgraph.cli_commands.listing import add_listing, add_time_range, time_cell
from calcgraph.client import CalcgraphError
from calcgraph.client import models as m
from calcgraph.client.sync import Client
from calcgraph.progress import OUTPUT_UNITS_QUERY, RunProgress, Units, output_units


def _units(client: Client, run_id: str) -> Units:
    """Units of the run's typed outputs, for display only: without them values show bare."""
    try:
        answer = client.graphql(OUTPUT_UNITS_QUERY, {"id": run_id})
    except CalcgraphError:
        return {}
    return output_units(answer.get("data") or {})


def _exit(run: m.Run) -> int:
    return OK if run.status == "completed" else FAILED


def _follow(context: Context, run: m.Run, args: argparse.Namespace) -> m.Run:
    client = context.client
    long_poll = None if args.period_only else 30.0
    if context.as_json:
        return client.run_until_done(
            run.id, period=args.period, long_poll=long_poll, timeout=args.timeout
        )
    units = _units(client, run.id)
    with RunProgress(
        context.console,
        units=units,
        title=args.slug,
        cache_lookup=lambda job_id: client.get_job(job_id).cache_hit,
    ) as progress:
        progress.update(run.model_dump(mode="json"))
        final = client.run_until_done(
            run.id,
            on_update=lambda r: progress.update(r.model_dump(mode="json")),
            period=args.period,
            long_poll=long_poll,
            timeout=args.timeout,
        )
        progress.finish(final.model_dump(mode="json"))
    return final


def _start(context: Context, args: argparse.Namespace) -> int:
    run = context.client.start_run(args.slug, inputs_of(args), refresh=args.refresh)
    return _started(context, run, args)


def _started(context: Context, run: m.Run, args: argparse.Namespace) -> int:
    if args.no_follow:
        context.emit(run, lambda: context.console.print(f"run {run.id} {run.status}"))
        return OK
    final = _follow(context, run, args)
    if context.as_json:
        context.emit(final)
    return _exit(final)


def show_run(console: Console, run: m.Run) -> None:
    progress = RunProgress(console, live=True)
    console.print(progress.table(run.model_dump(mode="json")))
    if run.done:
        console.print(progress.summary(run.model_dump(mode="json")))


def _show(context: Context, args: argparse.Namespace) -> int:
    run = context.client.get_run(args.run_id)
    context.emit(run, lambda: show_run(context.console, run))
    return OK if run.status != "failed" else FAILED


def _cancel(context: Context, args: argparse.Namespace) -> int:
    run = context.client.cancel_run(args.run_id)
    context.emit(run, lambda: show_run(context.console, run))
    return OK


def _rerun(context: Context, args: argparse.Namespace) -> int:
    run = context.client.rerun(
        args.run_id,
        start_from=args.start_from,
        workflow_version=args.workflow_version,
        inputs=inputs_of(args),
    )
    args.slug = f"re-run of {args.run_id}"
    return _started(context, run, args)


def _follow_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-follow", action="store_true", help="print the new run and return at once"
    )
    parser.add_argument(
        "--period", type=float, default=2.0, help="seconds between ticks that change nothing"
    )
    parser.add_argument(
        "--period-only",
        action="store_true",
        help="tick every --period seconds instead of long-polling the tick",
    )
    parser.add_argument("--timeout", type=float, default=None, help="give up after S seconds")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = [global_options()]
    runs = command_group(sub, "runs", "start and follow workflow runs")
    start = runs.add_parser(
        "start", parents=common, help="start a run and show its progress until it ends"
    )
    start.add_argument("slug", metavar="SLUG", help="workflow slug")
    add_input_options(
        start, "an input node's value: JSON, else a quantity like '3 m', else text; repeatable"
    )
    _follow_options(start)
    start.add_argument(
        "--refresh",
        action="store_true",
        help="never answer a node from the result cache (new results are stored)",
    )
    start.set_defaults(func=command(_start, suggest_workflow))
    add_command_on(runs, "cancel", "cancel a run: its running jobs are stopped", "run_id", _cancel)
    rerun = add_command_on(
        runs,
        "rerun",
        "start a new run from a finished one, reusing what succeeded",
        "run_id",
        _rerun,
    )
    rerun.add_argument(
        "--from",
        dest="start_from",
        choices=("failure", "start"),
        default="failure",
        help="failure (default): reuse nodes that succeeded with the same inputs; start: all",
    )
    rerun.add_argument(
        "--workflow-version",
        choices=("same", "latest"),
        default="same",
        help="the original run's workflow version (default) or the latest",
    )
    add_input_options(rerun, "override an input of the original run; repeatable")
    _follow_options(rerun)
    add_command_on(runs, "show", "a run's node states and outputs", "run_id", _show)
    listing = add_listing(
        runs,
        "your runs",
        lambda context, args: context.client.list_runs(
            args.limit,
            args.cursor,
            args.status or (),
            args.workflow,
            args.started_after,
            args.started_before,
        ),
        ("run", "status", "started", "completed", "failed node"),
        lambda r: (
            r.id,
            r.status,
            time_cell(r.started_at),
            time_cell(r.completed_at),
            r.first_failed_node_key,
        ),
    )
    listing.add_argument("--status", action="append", help="filter by status; repeatable")
    listing.add_argument("--workflow", default=None, help="filter by workflow slug")
    add_time_range(listing, "started")
