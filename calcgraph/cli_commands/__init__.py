"""The client commands of `calcgraph` (login, packages, functions, jobs, workflows, runs):
they talk to a running server through `calcgraph.client`, never to the database."""

from __future__ import annotations

import argparse

from calcgraph.cli_commands import admin, catalog, events, login, runs
from calcgraph.cli_commands.common import EXIT_CODES_HELP, add_global_options


def register(
    parser: argparse.ArgumentParser, sub: argparse._SubParsersAction[argparse.ArgumentParser]
) -> None:
    add_global_options(parser, suppress=False)
    login.register(sub)
    catalog.register(sub)
    runs.register(sub)
    events.register(sub)
    admin.register(sub)


__all__ = ["EXIT_CODES_HELP", "register"]
