"""The CLI's listings: `GROUP list` commands (a page of a listing as a table or JSON), their
text search and time-range options, and how a time reads in their tables."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from calcgraph.cli_commands.common import OK, Context, Subcommands, command, global_options
from calcgraph.client.sync import Client


def add_listing(
    group: Subcommands,
    help: str,
    lister: Callable[[Context, argparse.Namespace], Any],
    columns: Sequence[str],
    row: Callable[[Any], Sequence[Any]],
) -> argparse.ArgumentParser:
    """`GROUP list`: one page of what `lister` lists (`--limit`, `--cursor`), for people a
    table of `columns`, one `row` an item."""

    def run(context: Context, args: argparse.Namespace) -> int:
        page = lister(context, args)
        context.emit_table(page, columns, (row(item) for item in page.items))
        return OK

    listing = group.add_parser("list", parents=[global_options()], help=help)
    listing.add_argument("--limit", type=int, default=None, help="items per page (max 500)")
    listing.add_argument("--cursor", default=None, help="next_cursor of the previous page")
    listing.set_defaults(func=command(run))
    return listing


def add_searched_listing(
    group: Subcommands,
    help: str,
    lister: Callable[[Client], Callable[[int | None, str | None, str | None], Any]],
    search_help: str,
    columns: Sequence[str],
    row: Callable[[Any], Sequence[Any]],
) -> None:
    """`GROUP list` (see `add_listing`) of a catalog searched by text: `--search`, which
    `lister` (the client's listing, given the client) receives after the limit and cursor."""
    listing = add_listing(
        group,
        help,
        lambda context, args: lister(context.client)(args.limit, args.cursor, args.search),
        columns,
        row,
    )
    listing.add_argument("--search", default=None, help=search_help)


def add_time_range(listing: argparse.ArgumentParser, name: str) -> None:
    """`--NAME-after` (inclusive) and `--NAME-before` (exclusive): ISO dates or date-times."""
    for side, bound in (("after", "inclusive"), ("before", "exclusive")):
        listing.add_argument(
            f"--{name}-{side}", default=None, help=f"ISO date or date-time, {bound} (UTC)"
        )


def time_cell(moment: datetime | None) -> str:
    """A time in a listing's table: to the second, empty when there is none."""
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")
