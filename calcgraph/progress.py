"""The live view of a workflow run, for the terminal: `calcgraph demo` and `calcgraph runs`.

It is fed plain run dicts as `GET /workflow-runs/{id}` and `POST .../tick` return them (with
`plan_snapshot` and `node_states`), so any client can drive it. On a terminal it shows a
`rich.live.Live` table that redraws itself; elsewhere (CI, pipes) it prints one line per state
change instead, since a redrawn table is noise in a log.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})

# Port types and the catalog's units of one run, in one GraphQL request (`output_units` reads
# the answer): node states carry their frozen function version, whose outputs are typed.
OUTPUT_UNITS_QUERY = """
query RunOutputUnits($id: ID!) {
  types { name unit }
  workflowRun(id: $id) { nodeStates { nodeKey functionVersion { outputsSchema } } }
}
"""

Units = Mapping[str, Mapping[str, str]]
"""node key -> output port -> unit symbol, for ports whose type has a unit."""

CacheLookup = Callable[[str], bool]
"""job id -> whether the job was answered from the result cache (`GET /jobs/{id}`)."""

_STYLE = {
    "pending": "dim",
    "running": "yellow",
    "success": "green",
    "failed": "bold red",
    "cancelled": "magenta",
    "completed": "bold green",
}
_MARK = {"success": "✓", "failed": "✗", "cancelled": "⊘", "pending": "·"}


def output_units(data: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Units of every typed output port of a run, from the `data` of `OUTPUT_UNITS_QUERY`."""
    catalog = {t["name"]: t["unit"] for t in data.get("types") or () if t.get("unit")}
    units: dict[str, dict[str, str]] = {}
    for state in (data.get("workflowRun") or {}).get("nodeStates") or ():
        schema = (state.get("functionVersion") or {}).get("outputsSchema") or {}
        ports = {
            port: catalog[spec["type"]]
            for port, spec in schema.items()
            if isinstance(spec, Mapping) and spec.get("type") in catalog
        }
        if ports:
            units[state["nodeKey"]] = ports
    return units


def format_value(value: Any, unit: str | None = None) -> str:
    """A port value for people: floats to six significant digits, then the unit if any."""
    if isinstance(value, bool) or value is None:
        text = json.dumps(value)
    elif isinstance(value, float):
        text = f"{value:.6g}" if math.isfinite(value) else str(value)
    elif isinstance(value, int | str):
        text = str(value)
    else:
        text = json.dumps(value, separators=(", ", ": "))
    return f"{text} {unit}" if unit else text


def _parse(moment: Any) -> datetime | None:
    if not isinstance(moment, str):
        return None
    try:
        return datetime.fromisoformat(moment.replace("Z", "+00:00"))
    except ValueError:
        return None


def _seconds(start: Any, end: Any, now: datetime) -> float | None:
    begun = _parse(start)
    if begun is None:
        return None
    finished = _parse(end) or now
    return max(0.0, (finished - begun).total_seconds())


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds:.2f}s" if seconds < 60 else f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def _short(identifier: Any) -> str:
    return str(identifier)[:8] if identifier else ""


class RunProgress:
    """Shows one run as it advances: `update(run)` after every tick, then `finish(run)`.

    `live=None` picks the table when the console is an interactive terminal, else plain lines.
    Use it as a context manager so the live display always stops.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        live: bool | None = None,
        units: Units | None = None,
        title: str = "",
        cache_lookup: CacheLookup | None = None,
        show_computed: bool = False,
    ) -> None:
        self.console = console or Console()
        self.live = (
            live
            if live is not None
            else self.console.is_terminal and not self.console.is_dumb_terminal
        )
        self.units: Units = units or {}
        self.title = title
        self.cache_lookup = cache_lookup
        self.show_computed = show_computed
        """Also list every intermediate output at the end (the demo's checks)."""
        self._cache_hits: dict[str, bool] = {}
        self._run: Mapping[str, Any] = {}
        self._seen: dict[str, tuple[Any, ...]] = {}
        self._spinners: dict[str, Spinner] = {}
        self._display: Live | None = None
        self._clock = time.monotonic()

    def __enter__(self) -> RunProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    # Feeding -----------------------------------------------------------------------------

    def update(self, run: Mapping[str, Any]) -> None:
        self._run = run
        self._look_up_cache_hits(run)
        if not self.live:
            self._print_changes(run)
            return
        if self._display is None:
            self._display = Live(
                self, console=self.console, refresh_per_second=12, redirect_stderr=False
            )
            self._display.start()
        else:
            self._display.refresh()

    def finish(self, run: Mapping[str, Any]) -> None:
        """The last state, then a panel of the terminal outputs or of the failure."""
        self.update(run)
        self._stop()
        if self.live:
            self.console.print(self.summary(run))
        else:
            for line in self._plain_summary(run):
                self._line(line)

    def _look_up_cache_hits(self, run: Mapping[str, Any]) -> None:
        """Node states do not say whether their job came from the result cache; the job
        does. One lookup per finished job, never again."""
        if self.cache_lookup is None:
            return
        for state in (run.get("node_states") or {}).values():
            job_id = state.get("job_id")
            if state.get("status") == "success" and job_id and job_id not in self._cache_hits:
                self._cache_hits[job_id] = self.cache_lookup(job_id)

    def cached(self, row: Mapping[str, Any]) -> bool:
        return self._cache_hits.get(str(row.get("job_id")), False)

    def _stop(self) -> None:
        if self._display is not None:
            self._display.stop()
            self._display = None

    # Rows shared by both displays -------------------------------------------------------

    @staticmethod
    def rows(run: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Every function and extract node in plan order: key, kind, function, state."""
        plan_nodes = (run.get("plan_snapshot") or {}).get("nodes") or []
        plan = {node["node_key"]: node for node in plan_nodes}
        states: Mapping[str, Any] = run.get("node_states") or {}
        keys = [node["node_key"] for node in plan_nodes if node["node_key"] in states]
        keys += [key for key in states if key not in plan]
        rows = []
        for key in keys:
            node = plan.get(key, {})
            kind = node.get("kind", "")
            if kind == "extract":
                what = f"{node.get('mode')} {node.get('from_node_key')}:{node.get('pattern')}"
            else:
                what = node.get("function") or ""
            rows.append({"node_key": key, "kind": kind, "function": what, **states[key]})
        return rows

    def _elapsed(self, run: Mapping[str, Any]) -> float | None:
        now = datetime.now().astimezone()
        return _seconds(run.get("started_at"), run.get("completed_at"), now)

    # Live table ----------------------------------------------------------------------------

    def __rich__(self) -> RenderableType:
        return self.table(self._run)

    def table(self, run: Mapping[str, Any]) -> Table:
        status = str(run.get("status", ""))
        heading = Text.assemble(
            (self.title + "  " if self.title else "", "bold"),
            ("run ", "dim"),
            (_short(run.get("id")), "cyan"),
            "  ",
            (status, _STYLE.get(status, "")),
            ("  " + _duration(self._elapsed(run)), "dim"),
        )
        table = Table(title=heading, title_justify="left", expand=False, box=None, padding=(0, 1))
        for name in ("node", "kind", "function", "status", "time", "job"):
            table.add_column(
                name, justify="right" if name == "time" else "left", header_style="bold dim"
            )
        now = datetime.now().astimezone()
        for row in self.rows(run):
            state = str(row.get("status", ""))
            table.add_row(
                Text(row["node_key"], style="bold"),
                Text(row["kind"], style="dim"),
                row["function"],
                self._status_cell(row["node_key"], state, self.cached(row)),
                _duration(_seconds(row.get("started_at"), row.get("finished_at"), now)),
                Text(_short(row.get("job_id")), style="dim"),
            )
        return table

    def _status_cell(self, key: str, state: str, cached: bool = False) -> RenderableType:
        if state == "running":
            spinner = self._spinners.setdefault(
                key, Spinner("dots", text=Text("running", style="yellow"), style="yellow")
            )
            return spinner
        self._spinners.pop(key, None)
        cell = Text(f"{_MARK.get(state, ' ')} {state}", style=_STYLE.get(state, ""))
        if cached:
            cell.append(" (cache hit)", style="cyan")
        return cell

    def summary(self, run: Mapping[str, Any]) -> RenderableType:
        """The final panel: terminal outputs with units, or the failed node and its error."""
        status = str(run.get("status", ""))
        elapsed = _duration(self._elapsed(run))
        if status == "completed":
            outputs = Table.grid(padding=(0, 2))
            outputs.add_column(style="bold")
            outputs.add_column()
            computed = self.computed_lines(run) if self.show_computed else []
            for label, value in computed:
                outputs.add_row(Text(label, style="dim"), value)
            if computed:
                outputs.add_row("", "")
            for label, value in self.output_lines(run):
                outputs.add_row(label, value)
            return Panel(
                outputs,
                title=f"[bold green]completed[/] in {elapsed}",
                title_align="left",
                subtitle="terminal outputs",
                subtitle_align="left",
                border_style="green",
                expand=False,
            )
        failure = Text("\n".join(self.failure_lines(run)))
        return Panel(
            Group(failure),
            title=f"[bold red]{status}[/] after {elapsed}",
            title_align="left",
            border_style="red",
            expand=False,
        )

    def output_lines(self, run: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(`node.port`, value with unit) of every terminal output, in node then port order."""
        lines = []
        for node_key, outputs in (run.get("terminal_outputs") or {}).items():
            units = self.units.get(node_key, {})
            if not isinstance(outputs, Mapping):
                lines.append((node_key, format_value(outputs)))
                continue
            for port, value in outputs.items():
                lines.append((f"{node_key}.{port}", format_value(value, units.get(port))))
        return lines

    def computed_lines(self, run: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(`node.port`, value with unit) of every function node that is not terminal, in
        plan order: what the run computed on the way (the demo's checks)."""
        terminal = run.get("terminal_outputs") or {}
        lines = []
        for row in self.rows(run):
            if row["kind"] != "function" or row["node_key"] in terminal:
                continue
            units = self.units.get(row["node_key"], {})
            for port, value in (row.get("outputs") or {}).items():
                lines.append((f"{row['node_key']}.{port}", format_value(value, units.get(port))))
        return lines

    @staticmethod
    def failure_lines(run: Mapping[str, Any]) -> list[str]:
        key = run.get("first_failed_node_key")
        lines = []
        if key:
            error = ((run.get("node_states") or {}).get(key) or {}).get("error") or {}
            lines.append(f"failed node: {key}")
            lines.append(f"error: {error.get('kind', 'unknown')}: {error.get('message', '')}")
        elif run.get("error_message"):
            lines.append(f"run: {run['error_message']}")
        return lines or [f"the run ended {run.get('status')}"]

    # Plain lines ---------------------------------------------------------------------------

    def _print_changes(self, run: Mapping[str, Any]) -> None:
        stamp = f"[{time.monotonic() - self._clock:6.2f}s]"
        for row in self.rows(run):
            state = (row.get("status"), row.get("job_id"), row.get("attempt"))
            before = self._seen.get(row["node_key"], ("pending", None, 0))
            if state == before:
                continue
            self._seen[row["node_key"]] = state
            line = f"{stamp} {row['node_key']:<16} {row['kind']:<8} {row['status']:<9}"
            if row.get("status") in ("success", "failed", "cancelled"):
                seconds = _seconds(row.get("started_at"), row.get("finished_at"), _now())
                line += f" {_duration(seconds)}" if seconds is not None else ""
            if row.get("job_id"):
                line += f" job {_short(row['job_id'])}"
            if row.get("status") == "success" and self.cached(row):
                line += " cache hit"
            if row.get("status") == "failed" and row.get("error"):
                error = row["error"]
                line += f" {error.get('kind')}: {error.get('message')}"
            self._line(line)
        # After its nodes: the run ends because of them.
        status = run.get("status")
        if self._seen.get("") != (status,):
            self._seen[""] = (status,)
            self._line(f"{stamp} run {run.get('id')} {status}")

    def _line(self, line: str) -> None:
        # One physical line whatever the width: logs are read with grep, not on a screen.
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def _plain_summary(self, run: Mapping[str, Any]) -> list[str]:
        status = str(run.get("status", ""))
        lines = [f"{status} in {_duration(self._elapsed(run))}"]
        if status == "completed":
            lines[0] += "; terminal outputs:"
            lines += [f"  {label} = {value}" for label, value in self.output_lines(run)]
            computed = self.computed_lines(run) if self.show_computed else []
            if computed:
                lines.append("computed on the way:")
                lines += [f"  {label} = {value}" for label, value in computed]
        else:
            lines += [f"  {line}" for line in self.failure_lines(run)]
        return lines


def _now() -> datetime:
    return datetime.now().astimezone()
