"""`calcgraph runs cancel|rerun`, `calcgraph jobs cancel` and `--refresh`, through
`calcgraph.cli.main` (and so the Python client) against a real server (contract section 10)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from calcgraph.client import AsyncClient, Client
from calcgraph.client.errors import Conflict, NotFound, PermissionDenied
from calcgraph.client.models import Run
from calcgraph.client.values import quantity
from tests.client.conftest import unique
from tests.client.packages import tools_package
from tests.client.test_cli import Cli, cli  # noqa: F401


def _workflow(cli: Cli, tmp_path: Path) -> tuple[str, str]:  # noqa: F811
    name, directory = tools_package(tmp_path)
    code, _, err = cli("packages", "publish", str(directory))
    assert code == 0, err
    slug = unique("ctl")
    x = {"source": "input_node", "input_key": "x", "from_port": "value"}
    document = {
        "slug": slug,
        "name": "Run control",
        "graph": {
            "nodes": [
                {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
                {"node_key": "len", "kind": "input", "input_spec": {"type_expr": "Length"}},
                {
                    "node_key": "s",
                    "kind": "function",
                    "function": f"{name}/scale",
                    "input_bindings": {
                        "length": {
                            "source": "input_node",
                            "input_key": "len",
                            "from_port": "value",
                        },
                        "factor": x,
                    },
                },
                {
                    "node_key": "fails",
                    "kind": "function",
                    "function": f"{name}/boom",
                    "input_bindings": {
                        "x": {"source": "edge", "from_node_key": "s", "from_port": "scaled"}
                    },
                },
            ]
        },
    }
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps(document))
    code, _, err = cli("workflows", "create", str(path))
    assert code == 0, err
    return name, slug


def _until_done(client: Client, run_id: str) -> Run:
    """The run followed to its end within two minutes (the token lives five); one that does
    not end fails with its node states and their jobs, not with an expired token."""
    try:
        return client.run_until_done(run_id, timeout=120)
    except TimeoutError:
        run = client.get_run(run_id)
        jobs = {
            key: state.job_id and client.get_job(state.job_id).model_dump(mode="json")
            for key, state in run.node_states.items()
        }
        pytest.fail(f"run {run_id} did not end: {run.model_dump(mode='json')}; jobs {jobs}")


def test_rerun_and_cancel_a_run(cli: Cli, tmp_path: Path) -> None:  # noqa: F811
    _, slug = _workflow(cli, tmp_path)
    code, first = cli.json("runs", "start", slug, "-i", "x=2", "-i", "len=1 m")
    assert code == 1
    assert first["first_failed_node_key"] == "fails"
    # `s` and `fails` run side by side: the run fails when `fails` does, and a later tick of
    # the failed run still records `s`'s success. Tick until it has, then re-run.
    with Client(cli.served.url, cli.served.token("alice")) as client:
        deadline = time.monotonic() + 60
        while (state := client.tick(first["id"]).node_states["s"]).status != "success":
            assert state.status in {"pending", "running"}, state
            assert time.monotonic() < deadline, state
            time.sleep(0.2)
        first = client.get_run(first["id"]).model_dump(mode="json")
    code, again = cli.json("runs", "rerun", first["id"])
    assert code == 1
    assert again["rerun_of"] == first["id"]
    assert again["node_states"]["s"]["reused"] is True
    assert again["node_states"]["s"]["job_id"] == first["node_states"]["s"]["job_id"]
    code, fresh = cli.json(
        "runs", "rerun", first["id"], "--from", "start", "-i", "x=3", "--no-follow"
    )
    assert code == 0
    assert fresh["inputs"]["x"] == 3
    assert {s["status"] for s in fresh["node_states"].values()} == {"pending"}
    code, cancelled = cli.json("runs", "cancel", fresh["id"])
    assert code == 0
    assert cancelled["status"] == "cancelled"
    assert {s["status"] for s in cancelled["node_states"].values()} == {"cancelled"}
    code, _, err = cli("runs", "cancel", fresh["id"])
    assert code == 6
    assert err.startswith("error: Conflict: ")
    code, _, err = cli("runs", "rerun", first["id"], user="bob")
    assert code in (4, 5), err  # hidden from another user


def test_cancel_a_job_and_refresh(cli: Cli, tmp_path: Path) -> None:  # noqa: F811
    name, _ = _workflow(cli, tmp_path)
    code, queued = cli.json(
        "functions", "execute", f"{name}/slow", "-i", "seconds=60", "--wait", "0"
    )
    assert queued["status"] in ("queued", "running")
    code, denied, err = cli("jobs", "cancel", queued["job_id"], user="bob")
    assert code in (4, 5), err
    code, job = cli.json("jobs", "cancel", queued["job_id"])
    assert code == 0
    assert job["status"] == "failed"
    assert job["error"]["kind"] == "cancelled"
    code, _, err = cli("jobs", "cancel", queued["job_id"])
    assert code == 6
    args = ("functions", "execute", f"{name}/scale", "-i", "length=2 m", "-i", "factor=2")
    code, first = cli.json(*args)
    assert code == 0
    code, refreshed = cli.json(*args, "--refresh")
    assert code == 0
    assert refreshed["job_id"] != first["job_id"]
    code, job = cli.json("jobs", "show", refreshed["job_id"])
    assert job["cache_hit"] is False


def test_the_python_client(cli: Cli, tmp_path: Path) -> None:  # noqa: F811
    """The Python client's run control, sync and async: re-run of the latest version with an
    override, cancel of a run and of a job (Conflict once ended, hidden from another user),
    and a run started with `refresh` never answered from the cache."""
    name, slug = _workflow(cli, tmp_path)
    url = cli.served.url
    with Client(url, cli.served.token("alice")) as client:
        first = _until_done(client, client.start_run(slug, {"x": 2, "len": quantity(1, "m")}).id)
        assert first.status == "failed"
        again = client.rerun(first.id, workflow_version="latest", inputs={"x": 3})
        assert again.rerun_of == first.id
        assert again.inputs["x"] == 3
        assert again.node_states["s"].reused is False  # its input changed
        cancelled = client.cancel_run(again.id)
        assert cancelled.status == "cancelled"
        assert {s.status for s in cancelled.node_states.values()} == {"cancelled"}
        with pytest.raises(Conflict):
            client.cancel_run(again.id)
        with (
            Client(url, cli.served.token("bob")) as bob,
            pytest.raises((NotFound, PermissionDenied)),
        ):
            bob.cancel_run(first.id)

        scaled = unique("scaled")
        graph = {
            "nodes": [
                n for n in client.get_workflow(slug).graph["nodes"] if n["node_key"] != "fails"
            ]
        }
        client.create_workflow(scaled, "Scaled", graph)
        hits = []
        for refresh in (False, False, True, False):
            run = _until_done(
                client,
                client.start_run(scaled, {"x": 7, "len": quantity(2, "m")}, refresh=refresh).id,
            )
            assert run.status == "completed", run
            job_id = run.node_states["s"].job_id
            assert job_id is not None
            hits.append(client.get_job(job_id).cache_hit)
        assert hits == [False, True, False, True]

    async def stop_a_job() -> None:
        async with AsyncClient(url, cli.served.token("alice")) as client:
            sent = await client.execute(f"{name}/slow", {"seconds": 60}, wait=0)
            job = await client.cancel_job(sent.job_id)
            assert (job.status, (job.error or {}).get("kind")) == ("failed", "cancelled")
            with pytest.raises(Conflict):
                await client.cancel_job(sent.job_id)

    asyncio.run(stop_a_job())


def test_rerun_the_latest_version_and_start_with_refresh(cli: Cli, tmp_path: Path) -> None:  # noqa: F811
    """`runs rerun --workflow-version latest` runs the workflow's newest graph (here without
    the failing node: it completes), and `runs start --refresh` is never a cache hit."""
    _, slug = _workflow(cli, tmp_path)
    code, first = cli.json("runs", "start", slug, "-i", "x=2", "-i", "len=1 m")
    assert code == 1
    with Client(cli.served.url, cli.served.token("alice")) as client:
        graph = client.get_workflow(slug).graph
        kept = [n for n in graph["nodes"] if n["node_key"] != "fails"]
        client.update_workflow(slug, {"nodes": kept})
    code, same = cli.json("runs", "rerun", first["id"], "--no-follow")
    assert code == 0
    assert same["workflow_version_id"] == first["workflow_version_id"]
    assert "fails" in same["node_states"]
    code, latest = cli.json("runs", "rerun", first["id"], "--workflow-version", "latest")
    assert code == 0, latest
    assert latest["status"] == "completed"
    assert latest["workflow_version_id"] != first["workflow_version_id"]
    assert set(latest["node_states"]) == {"s"}
    hits = []
    for extra in ((), (), ("--refresh",)):
        code, run = cli.json("runs", "start", slug, "-i", "x=5", "-i", "len=3 m", *extra)
        assert code == 0, run
        code, job = cli.json("jobs", "show", run["node_states"]["s"]["job_id"])
        hits.append(job["cache_hit"])
    assert hits == [False, True, False]
