"""What every client command shares: global options, the client, output (rich tables for
people, one JSON document with `--json`) and the exit code of each error kind."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from calcgraph.client import errors as e
from calcgraph.client.settings import ClientSettings
from calcgraph.client.sync import Client
from calcgraph.client.values import parse_assignments

OK, FAILED, USAGE = 0, 1, 2
# Each exit code of an error, the error kinds that exit with it and what `--help` says of it.
_ERROR_EXITS: tuple[tuple[int, tuple[type[e.CalcgraphError], ...], str], ...] = (
    (
        3,
        (e.Unauthenticated,),
        "Unauthenticated (401): no token, or an expired or invalid one; run `calcgraph login`",
    ),
    (4, (e.PermissionDenied,), "PermissionDenied (403)"),
    (5, (e.NotFound,), "NotFound (404)"),
    (6, (e.Conflict,), "Conflict (409)"),
    (7, (e.ValidationError,), "ValidationError (422)"),
    (8, (e.MethodNotAllowed, e.InvalidRequest), "InvalidRequest (400, 405)"),
    (9, (e.RateLimited,), "RateLimited (429)"),
    (10, (e.ConnectionError, e.InternalError), "server error (500, 503) or server unreachable"),
    (11, (e.PayloadTooLarge,), "PayloadTooLarge (413)"),
    (12, (e.NotAcceptable,), "NotAcceptable (406)"),
)
# No error kind above is a subclass of another (Unavailable is an InternalError: 10).
EXIT_CODES: tuple[tuple[type[e.CalcgraphError], int], ...] = tuple(
    (kind, code) for code, kinds, _ in _ERROR_EXITS for kind in kinds
)

EXIT_CODES_HELP = "\n".join(
    [
        "exit codes:",
        "  0   success",
        "  1   the run or job ended failed",
        "  2   usage error (bad arguments, unreadable file)",
        *(f"  {code:<4}{told}" for code, _, told in _ERROR_EXITS),
    ]
)


def exit_code(error: e.CalcgraphError) -> int:
    for cls, code in EXIT_CODES:
        if isinstance(error, cls):
            return code
    status = error.status or 500
    return 10 if status >= 500 else 8


def add_global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """`--url`, `--token`, `--json`, accepted before the command and after it (`suppress`
    keeps a subcommand from resetting what was given before it)."""
    default: Any = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--url", default=default, help="API base URL (else CALCGRAPH_URL, the login's, :8000)"
    )
    parser.add_argument(
        "--token", default=default, help="bearer token (else CALCGRAPH_TOKEN, the login's)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="machine output: one JSON document on stdout",
    )


def global_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    add_global_options(parent, suppress=True)
    return parent


def add_input_options(parser: argparse.ArgumentParser, input_help: str) -> None:
    """`--input KEY=VALUE` (repeatable) and `--inputs-json FILE`, read by `inputs_of`."""
    parser.add_argument("--input", "-i", action="append", metavar="KEY=VALUE", help=input_help)
    parser.add_argument("--inputs-json", metavar="FILE", help="inputs as a JSON object file")


def inputs_of(args: argparse.Namespace) -> dict[str, Any]:
    """The inputs of `--inputs-json`, each `--input` overriding its key."""
    inputs: dict[str, Any] = {}
    if args.inputs_json:
        inputs = json.loads(Path(args.inputs_json).read_text())
    return inputs | parse_assignments(args.input)


def to_json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json(item) for key, item in value.items()}
    return value


@dataclass
class Context:
    args: argparse.Namespace
    console: Console = field(default_factory=lambda: Console(soft_wrap=True))
    errors: Console = field(default_factory=lambda: Console(stderr=True, soft_wrap=True))
    _client: Client | None = None

    @property
    def as_json(self) -> bool:
        return bool(getattr(self.args, "json", False))

    @property
    def settings(self) -> ClientSettings:
        return ClientSettings()

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(
                getattr(self.args, "url", None),
                getattr(self.args, "token", None),
                settings=self.settings,
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def emit(self, value: Any, human: Callable[[], None] | None = None) -> None:
        """`value` as JSON with `--json`, else what `human` prints (default: the JSON, indented)."""
        if self.as_json or human is None:
            sys.stdout.write(json.dumps(to_json(value), indent=None if self.as_json else 2))
            sys.stdout.write("\n")
            return
        human()

    def emit_table(self, value: Any, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """`value` as JSON with `--json`, else `rows` as a table (a listing's one shape)."""
        self.emit(value, lambda: self.console.print(table(columns, rows)))

    def fail(self, message: str, error: e.CalcgraphError | None = None) -> None:
        self.errors.print(f"error: {message}", markup=False, highlight=False)
        # A workflow report is also flattened into `errors`: show it once, as the report.
        report = error.report if error is not None else None
        lines = report_lines(report) if report else error_lines(error)
        for line in lines:
            self.errors.print(f"  {line}", markup=False, highlight=False)
        if self.as_json:
            body: dict[str, Any] = {"detail": message}
            if error is not None:
                body = {**error.body, "detail": message, "kind": error.kind}
                body["status"] = error.status
            sys.stdout.write(json.dumps({"error": body}) + "\n")


def error_lines(error: e.CalcgraphError | None) -> list[str]:
    """`loc: msg` of each problem of a ValidationError."""
    lines = []
    for item in error.errors if error is not None else []:
        loc = ".".join(str(part) for part in item.get("loc", []))
        lines.append(f"{loc}: {item.get('msg', '')}")
    return lines


def report_lines(report: dict[str, Any]) -> list[str]:
    """A workflow validation report for people: `problem: node[.port]: reason`."""
    lines = []
    for problem, entries in report.items():
        for entry in entries or []:
            if not isinstance(entry, dict):
                lines.append(f"{problem}: {entry}")
                continue
            where = str(entry.get("node_key", ""))
            if entry.get("port"):
                where += f".{entry['port']}"
            lines.append(f"{problem}: {where}: {entry.get('reason', '')}")
    return lines


Command = Callable[[Context, argparse.Namespace], int]
Suggest = Callable[[Context, argparse.Namespace, str], str | None]
"""The closest name the user can see to the one a NotFound names, if any."""


def closest(name: str, candidates: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(name, list(dict.fromkeys(candidates)), n=1, cutoff=0.6)
    return matches[0] if matches else None


def command(
    function: Command, suggest: Suggest | None = None
) -> Callable[[argparse.Namespace], int]:
    """The argparse handler of a client command: one context, errors to exit codes.
    `suggest` adds "did you mean ...?" to a NotFound, from what the caller can list."""

    def handler(args: argparse.Namespace) -> int:
        context = Context(args)
        try:
            return function(context, args)
        except e.CalcgraphError as error:
            detail = error.detail
            if isinstance(error, e.NotFound) and suggest is not None:
                try:
                    hint = suggest(context, args, detail)
                except e.CalcgraphError:
                    hint = None  # a suggestion is a courtesy: never a second failure
                if hint:
                    detail += f"; did you mean {hint!r}?"
            context.fail(detail, error)
            return exit_code(error)
        except TimeoutError as error:
            context.fail(str(error))
            return FAILED
        except (ValueError, OSError) as error:
            context.fail(str(error))
            return USAGE
        finally:
            context.close()

    return handler


Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_command_on(
    group: Subcommands,
    name: str,
    help: str,
    target: str,
    function: Command,
    suggest: Suggest | None = None,
    metavar: str = "ID",
) -> argparse.ArgumentParser:
    """`GROUP NAME ID`: a command on one thing, which `function` reads as `args.<target>`;
    the caller adds any further options to the parser returned."""
    parser = group.add_parser(name, parents=[global_options()], help=help)
    parser.add_argument(target, metavar=metavar)
    parser.set_defaults(func=command(function, suggest))
    return parser


def command_group(sub: Subcommands, name: str, help: str) -> Subcommands:
    """`calcgraph NAME ...`: a group whose subcommand is required (`args.NAME_command`)."""
    return sub.add_parser(name, help=help).add_subparsers(dest=f"{name}_command", required=True)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str = "") -> Table:
    view = Table(title=title or None, title_justify="left", header_style="bold")
    for name in columns:
        view.add_column(name, overflow="fold")
    for row in rows:
        view.add_row(*("" if cell is None else str(cell) for cell in row))
    return view
