"""`calcgraph admin usage`: what every user holds beside the per-user limits (contract 8b)."""

from __future__ import annotations

import argparse

from calcgraph.cli_commands.common import OK, Context, command, command_group, global_options


def _usage(context: Context, args: argparse.Namespace) -> int:
    report = context.client.usage()
    limits = report.limits
    context.emit_table(
        report,
        (
            "user",
            f"runs not terminal (limit {limits.runs})",
            f"queued jobs (limit {limits.queued_jobs})",
            "jobs",
            f"stored bytes (limit {limits.stored_bytes})",
            f"largest workflow nodes (limit {limits.nodes})",
        ),
        (
            (
                u.username,
                u.unfinished_runs,
                u.queued_jobs,
                u.jobs,
                u.stored_bytes,
                u.largest_workflow_nodes,
            )
            for u in report.items
        ),
    )
    return OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = command_group(sub, "admin", "what admins may see of the whole platform")
    usage = admin.add_parser(
        "usage",
        parents=[global_options()],
        help="what every user holds now beside the per-user limits (admins only)",
    )
    usage.set_defaults(func=command(_usage))
