"""All SQL of workflow runs and their node states.

A tick reads the run row (locked), the jobs its running nodes wait on and those chain workers
started since the last tick; only when one of them finished does it need every node row (from
the process's memo when it has them), and it writes only the node rows that changed: a fixed
number of statements whatever the size of the run, each reaching its rows by key or index.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    event,
    null,
    select,
)

from calcgraph.db.base import RepositoryBase
from calcgraph.db.dialect import custom_plans
from calcgraph.domain.events.numbered.repository import rows_params, with_numbered
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.jobs.repository import JobRepository
from calcgraph.domain.packages.models import PackageVersion
from calcgraph.domain.read_models import attributes
from calcgraph.domain.runs.models import WorkflowRun
from calcgraph.domain.runs.snapshot import Lock, RunSnapshot, WorkflowFacts
from calcgraph.domain.runs.state import NODE_STATE_FIELDS, JobResult, NodeState, StartedJob
from calcgraph.domain.runs.statements import repository as queries
from calcgraph.domain.runs.views import STORED_FIELDS, NodeRow, RunRow, RunView


def run_view(
    run: WorkflowRun | RunRow,
    states: Mapping[str, NodeState] | None = None,
    plan_snapshot: dict[str, Any] | None = None,
) -> RunView:
    # A given plan is not read from the row (where it may not be loaded).
    given: dict[str, Any] = {} if plan_snapshot is None else {"plan_snapshot": plan_snapshot}
    stored = attributes(run, *(name for name in STORED_FIELDS if name not in given))
    held = isinstance(run, RunRow) and run.terminal_outputs_held
    return RunView(**stored, **given, node_states=states, terminal_outputs_omitted=held)


def _state_values(state: NodeState) -> dict[str, Any]:
    """A node state as its row's columns (`NODE_STATE_FIELDS`) take it."""
    return {
        "status": state.status,
        "job_id": state.job_id,
        "outputs": None if state.outputs is None else dict(state.outputs),
        "error": None if state.error is None else dict(state.error),
        "attempt": state.attempt,
        "started_at": state.started_at,
        "finished_at": state.finished_at,
        "retry_at": state.retry_at,
        "attempts": [dict(a) for a in state.attempts] or None,
        "reused": state.reused,
    }


class RunRepository(RepositoryBase[WorkflowRun]):
    model = WorkflowRun

    async def read(
        self, run_id: str, lock: Lock = "none", *, work: bool = False
    ) -> RunSnapshot | None:
        """The run row (without its large `plan_snapshot`) with its workflow's access facts, in
        one statement; None when there is no such run, or with `skip` when another unit of work
        holds its lock (SQLite's write sessions are serialised already).

        Locked (`skip`, `wait`: until the end of the unit of work, the tick's serialisation),
        with what the tick reconciles: the results of the finished jobs the run's running
        nodes wait on (the node rows by the (run, status) index, as many as the run has in
        flight, not as many as it has nodes, their jobs by primary key), and the jobs chain
        workers started for pending nodes since the last tick (by node key), with the results
        of those already finished. This unit of work adopts the starts it read, deleting them
        by id (what the statement's snapshot lacked stays for the next tick: see
        `queries.locked_run_with_work`); a run without any sends nothing more. Unlocked with
        `work`: whether a tick would find anything to reconcile (`RunSnapshot.work`)."""
        if lock != "none":
            statement = queries.locked_run_with_work(self._dialect, lock == "skip")
        else:
            statement = queries.run_with_work(self._dialect) if work else queries.RUN_WITH_FACTS
        rows = (await self.session.execute(statement, {"run_id": run_id})).all()
        if not rows:
            return None
        width, after = len(queries.RUN_COLUMNS), queries.AFTER_FACTS
        run, facts = RunRow(*rows[0][:width]), WorkflowFacts(*rows[0][width:after])
        if lock == "none":
            return RunSnapshot(run, facts, locked=False, work=work and bool(rows[0][after]))
        results, adopted = self._work(row[after:] for row in rows if row[after] is not None)
        if adopted:
            job_ids = [job.job_id for job in adopted.values()]
            await self.session.execute(queries.ADOPTED, {"run_id": run_id, "job_ids": job_ids})
        return RunSnapshot(run, facts, locked=True, results=results, started=adopted)

    async def terminal_outputs(self, run_id: str) -> dict[str, Any] | None:
        """The run's terminal outputs whole (a row read leaves big ones out: `RunRow`)."""
        outputs = await self.session.scalar(
            select(queries.RUNS.c.terminal_outputs).where(queries.RUNS.c.id == run_id)
        )
        return None if outputs is None else dict(outputs)

    async def plan_snapshot(self, run_id: str) -> dict[str, Any]:
        snapshot = await self.session.scalar(
            select(queries.RUNS.c.plan_snapshot).where(queries.RUNS.c.id == run_id)
        )
        assert snapshot is not None  # the run row is locked: it exists
        return dict(snapshot)

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the unit of work has committed (never after a rollback)."""
        event.listen(self.session.sync_session, "after_commit", lambda _: callback(), once=True)

    async def states(self, run_id: str, *, held: bool = False) -> dict[str, NodeState]:
        """The run's node states; `held`: for an answer, outputs over 64 KiB left in the
        database (`queries.HELD_STATE_COLUMNS`), never for a tick or a re-run, which use them."""
        columns = queries.HELD_STATE_COLUMNS if held else queries.STATE_COLUMNS
        read = queries.held_state if held else queries.state
        rows = await self.session.execute(select(*columns).where(queries.NODES.c.run_id == run_id))
        return {row[0]: read(row) for row in rows}

    async def plan_snapshots(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        rows = await self.session.execute(
            select(queries.RUNS.c.id, queries.RUNS.c.plan_snapshot).where(
                queries.RUNS.c.id.in_(run_ids)
            )
        )
        return {row[0]: dict(row[1]) for row in rows}

    async def node_rows(self, run_ids: Sequence[str], *, values: bool = True) -> list[NodeRow]:
        """Every node of the runs, by run and key, for an answer (outputs over 64 KiB left in
        the database: `states`); without `values`, outputs and error are not read (None): a
        whole run's 10,000 JSON documents when the reader shows none."""
        if not run_ids:
            return []
        # Table columns, not the model's: rows without the ORM's per-row loading.
        columns: list[Any] = [queries.NODES.c.run_id, queries.NODES.c.kind]
        columns += queries.HELD_STATE_COLUMNS if values else queries.STATE_COLUMNS
        read = queries.held_state if values else queries.state
        if not values:
            columns[5:7] = [null().label("outputs"), null().label("error")]
        rows = await self.session.execute(
            select(*columns)
            .where(queries.NODES.c.run_id.in_(run_ids))
            .order_by(queries.NODES.c.run_id, queries.NODES.c.node_key)
        )
        return [NodeRow(row[0], row[2], row[1], read(row[2:])) for row in rows.all()]

    @property
    def _dialect(self) -> str:
        return self.session.get_bind().dialect.name

    @staticmethod
    def _work(rows: Iterable[Any]) -> tuple[dict[str, JobResult], dict[str, StartedJob]]:
        """`work`'s rows as results (by job id) and chain starts (by node key)."""
        results: dict[str, JobResult] = {}
        adopted: dict[str, StartedJob] = {}
        for row in rows:
            if row[1] in queries.FINISHED:
                results[row[0]] = JobResult(
                    row[1], outputs=row[2], error=row[3], finished_at=row[4]
                )
            if row[8]:
                adopted[row[5]] = StartedJob(row[0], row[6], row[7])
        return results, adopted

    async def resolved_inputs(self, run_id: str) -> dict[str, Any]:
        """The run's inputs in SI, as its nodes received them."""
        found = await self.session.scalar(
            select(queries.RUNS.c.resolved_inputs).where(queries.RUNS.c.id == run_id)
        )
        return dict(found or {})

    async def cancelled_runs(self, run_ids: Iterable[str]) -> set[str]:
        """Of these runs, the cancelled ones (by primary key)."""
        wanted = sorted(set(run_ids))
        if not wanted:
            return set()
        rows = await self.session.execute(
            select(queries.RUNS.c.id).where(
                queries.RUNS.c.id.in_(wanted), queries.RUNS.c.status == "cancelled"
            )
        )
        return {row[0] for row in rows}

    async def running_jobs(self, run_id: str) -> list[tuple[str, str]]:
        """(job id, job status) of every job a running node of the run waits on."""
        rows = await self.session.execute(
            queries.jobs_of_running(self._dialect), {"run_id": run_id}
        )
        return [(row[0], row[1]) for row in rows]

    async def states_since(self, run_id: str, since: int) -> dict[str, NodeState]:
        """The node states a tick wrote after revision `since` (by the (run, revision) index),
        for an answer: outputs over 64 KiB held (`states`)."""
        rows = await self.session.execute(
            queries.states_since(self._dialect), {"run_id": run_id, "since": since}
        )
        return {row[0]: queries.held_state(row) for row in rows}

    async def write_states(
        self, run_id: str, changed: Mapping[str, NodeState], revision: int
    ) -> None:
        """Only the changed rows: on PostgreSQL the nodes a tick submitted, beyond `queries.FEW`,
        in one UPDATE from arrays (1,000 rows took 185 ms as an executemany, one statement per
        row on the server), every other row in one executemany UPDATE by primary key (Core:
        the ORM's bulk path costs more than the statement for a tick that submits 100
        nodes)."""
        if not changed:
            return
        rest = await self._start_many(run_id, changed, revision)
        if not rest:
            return
        await self.session.execute(
            queries.WRITE_STATE,
            [
                {
                    "k_run_id": run_id,
                    "k_node_key": key,
                    **{f"v_{name}": value for name, value in _state_values(state).items()},
                    "v_revision": revision,
                }
                for key, state in rest.items()
            ],
        )

    async def _start_many(
        self, run_id: str, changed: Mapping[str, NodeState], revision: int
    ) -> dict[str, NodeState]:
        """PostgreSQL: the nodes a tick submitted at one time, beyond `queries.FEW`, in one
        UPDATE from arrays each; the changed states left to write (all of them elsewhere)."""
        rest = dict(changed)
        if self._dialect != "postgresql":
            return rest
        submitted: dict[datetime | None, list[tuple[str, NodeState]]] = {}
        for key, state in changed.items():
            if queries.just_started(state):
                submitted.setdefault(state.started_at, []).append((key, state))
        many = {at: group for at, group in submitted.items() if len(group) > queries.FEW}
        # Planned for the tables as they are, not by a plan cached while they were tiny.
        around = custom_plans(self._dialect) if many else None
        previous = None if around is None else await self.session.scalar(around[0])
        for started_at, group in many.items():
            await self.session.execute(
                queries.START_MANY,
                {
                    "k_run_id": run_id,
                    "a_node_keys": [key for key, _ in group],
                    "a_job_ids": [state.job_id for _, state in group],
                    "a_attempts": [state.attempt for _, state in group],
                    "v_started_at": started_at,
                    "v_revision": revision,
                },
            )
            for key, _ in group:
                del rest[key]
        if around is not None:
            await self.session.execute(around[1], {"mode": previous})
        return rest

    async def write_tick(
        self,
        run_id: str,
        changed: Mapping[str, NodeState],
        fields: Mapping[str, Any],
        jobs: Sequence[dict[str, Any]] = (),
        events: Sequence[dict[str, Any]] = (),
    ) -> None:
        """A changing tick's writes: its changed node rows at the run's new revision (`fields`'
        `revision`), the run's fields (`write_states`, then `queries.WRITE_RUN`) and the rows
        of the jobs it submitted (`JobRepository.insert_many`). PostgreSQL: the three in one
        statement (`queries.WRITE_TICK`, the jobs' INSERT as a CTE of it when their rows name
        the same columns), after the submitted nodes' UPDATEs from arrays when a tick submitted
        more than `queries.FEW` at once; with the unit's held `events` (PostgreSQL only),
        written with their positions by that statement too (`with_numbered`)."""
        job_rows = JobRepository.from_session(self.session)
        inserted = job_rows.insert_statement(jobs) if jobs else None
        if jobs and inserted is None:
            await job_rows.insert_many(jobs)
        statement = queries.WRITE_RUN
        params: dict[str, Any] = {
            "k_id": run_id,
            **{f"v_{name}": fields[name] for name in queries.RUN_FIELDS},
        }
        if self._dialect != "postgresql":
            assert not events, "held events are written by a tick's write on PostgreSQL only"
            await self.write_states(run_id, changed, fields["revision"])
        else:
            rest = await self._start_many(run_id, changed, fields["revision"])
            values = [_state_values(state) for state in rest.values()]
            params["a_node_key"] = list(rest)
            for name in NODE_STATE_FIELDS:
                column = [row[name] for row in values]
                json_text = isinstance(queries.NODES.c[name].type, JSON)
                params[f"a_{name}"] = (
                    [None if v is None else json.dumps(v) for v in column] if json_text else column
                )
            statement = queries.WRITE_TICK
            if inserted is not None:
                statement = queries.write_tick_with(inserted[0])
                params |= inserted[1]
            if events:
                statement = with_numbered(statement)
                params |= rows_params(events)
        # The run's fields in one UPDATE by primary key built once (with the node rows on
        # PostgreSQL): Core, not a unit-of-work flush, for one row; the caller's `RunRow`
        # takes them (`persist.apply`).
        await self.session.execute(statement, params)

    async def _of_versions(self, version_ids: Iterable[str], *columns: Any) -> Sequence[Any]:
        """(function version id, *columns) of each of `version_ids`, the version joined to its
        function and its deployment (no ids, no statement)."""
        wanted = sorted(set(version_ids))
        if not wanted:
            return []
        rows = await self.session.execute(
            select(FunctionVersion.id, *columns)
            .join(Function, Function.id == FunctionVersion.function_id)
            .join(PackageVersion, PackageVersion.id == FunctionVersion.package_version_id)
            .where(FunctionVersion.id.in_(wanted))
        )
        return rows.all()

    async def function_owners(self, version_ids: Iterable[str]) -> dict[str, tuple[str, str]]:
        """Function version id -> (function id, package id), for the job rows of a tick."""
        rows = await self._of_versions(version_ids, Function.id, Function.package_id)
        return {row[0]: (row[1], row[2]) for row in rows}

    async def retry_defaults(self, version_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Function version id -> the retry policy its manifest declares as the default of its
        nodes (contract section 10), for those that declare one."""
        rows = await self._of_versions(version_ids, Function.name, PackageVersion.manifest)
        found: dict[str, dict[str, Any]] = {}
        for version_id, name, manifest in rows:
            declared = ((manifest or {}).get("functions") or {}).get(name) or {}
            if isinstance(declared.get("retry"), dict):
                found[version_id] = declared["retry"]
        return found
