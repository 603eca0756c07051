"""Issue 28: the client's listings pass the server's filters (jobs: `function`, `status`,
`created_after`, `created_before`; runs: `status`, `workflow`, `started_after`,
`started_before`; workflows, packages, functions: `search`), and so do the CLI's `list`
commands, against a real server on SQLite and PostgreSQL. Each filter narrows the answer (none
is accepted and ignored); a bad value is the server's ValidationError; another user's rows
never appear."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from calcgraph.client import Client, ValidationError, quantity
from calcgraph.demo import DEMO_INPUTS
from tests.client.conftest import DemoCopy, Served, unique
from tests.client.packages import tools_package
from tests.client.test_cli import Cli, cli  # noqa: F401

UTC = datetime.UTC
PAST = datetime.datetime(2000, 1, 1, tzinfo=UTC)
FUTURE = datetime.datetime(2100, 1, 1, tzinfo=UTC)


@pytest.fixture
def alice(served: Served) -> Client:
    with Client(served.url, served.token("alice")) as client:
        yield client  # type: ignore[misc]


def test_jobs_by_function_status_and_creation(
    alice: Client, served: Served, tmp_path: Path
) -> None:
    name, directory = tools_package(tmp_path)
    alice.publish_directory(directory)
    done = alice.execute(f"{name}/scale", {"length": quantity(2, "m"), "factor": 3})
    failed = alice.execute(f"{name}/boom", {"x": 2})
    assert (done.status, failed.status) == ("success", "failed")
    ours = {done.job_id, failed.job_id}

    def ids(**filters: object) -> set[str]:
        return {j.id for j in alice.list_jobs(limit=500, **filters).items}  # type: ignore[arg-type]

    assert ids(function=name) == ours
    assert ids(function=f"{name.upper()}/SCA") == {done.job_id}
    assert ids(function=name, status="success") == {done.job_id}  # one status, not its letters
    assert ids(function=name, status=["failed"]) == {failed.job_id}
    assert ids(function=name, status=["success", "failed"]) == ours
    assert ids(function=name, status=["queued"]) == set()
    assert ids(function=name, created_after=PAST, created_before=FUTURE) == ours
    assert ids(function=name, created_after=FUTURE) == set()
    assert ids(function=name, created_before=datetime.date(2000, 1, 1)) == set()
    assert ids(function=name, created_after="2000-01-01") == ours
    with pytest.raises(ValidationError) as bad:
        alice.list_jobs(status=["sleeping"])
    assert bad.value.status == 422
    with pytest.raises(ValidationError):
        alice.list_jobs(created_after="not a date")
    with served_client(served, "bob") as bob:
        assert bob.list_jobs(function=name, limit=500).items == []


def served_client(served: Served, user: str) -> Client:
    return Client(served.url, served.token(user))


def test_packages_functions_and_workflows_by_search(
    alice: Client, served: Served, demo: DemoCopy
) -> None:
    alice.publish_directory(demo.directory, visibility="private")
    slug = unique("searched")
    alice.create_workflow(slug, f"Title {slug}", demo.graph)

    packages = alice.list_packages(limit=500, search=demo.name.upper()).items
    assert [p.name for p in packages] == [demo.name]
    functions = alice.list_functions(limit=500, search=f"{demo.name}/cantil").items
    assert [(f.package, f.name) for f in functions] == [(demo.name, "cantilever")]
    assert {w.slug for w in alice.list_workflows(limit=500, search=slug).items} == {slug}
    assert {w.slug for w in alice.list_workflows(limit=500, search=f"title {slug}").items} == {slug}
    nothing = unique("nothing")
    assert alice.list_packages(search=nothing).items == []
    assert alice.list_functions(search=nothing).items == []
    assert alice.list_workflows(search=nothing).items == []
    with pytest.raises(ValidationError):
        alice.list_packages(search="x" * 201)
    with served_client(served, "bob") as bob:  # private to alice
        assert bob.list_packages(search=demo.name).items == []
        assert bob.list_functions(search=demo.name).items == []
        assert bob.list_workflows(search=slug).items == []


def test_runs_by_workflow_status_and_start(alice: Client, demo: DemoCopy) -> None:
    alice.publish_directory(demo.directory)
    slug = unique("filtered")
    alice.create_workflow(slug, "Filtered", demo.graph)
    run = alice.start_run(slug, DEMO_INPUTS)

    def ids(**filters: object) -> set[str]:
        page = alice.list_runs(limit=500, workflow=slug, **filters)  # type: ignore[arg-type]
        return {r.id for r in page.items}

    assert ids() == {run.id}
    assert ids(started_after=PAST, started_before=FUTURE) == {run.id}
    assert ids(started_after=FUTURE) == set()
    assert ids(started_before="2000-01-01") == set()
    assert alice.run_until_done(run.id).status == "completed"
    assert ids(status="completed") == {run.id}
    assert ids(status=["failed", "cancelled"]) == set()
    with pytest.raises(ValidationError):
        alice.list_runs(started_after=FUTURE, started_before=PAST)


def test_cli_list_commands_pass_the_filters(
    cli: Cli,  # noqa: F811
    tmp_path: Path,
) -> None:
    name, directory = tools_package(tmp_path)
    assert cli("packages", "publish", str(directory))[0] == 0
    code, executed = cli.json(
        "functions", "execute", f"{name}/scale", "--input", "length=2 m", "--input", "factor=3"
    )
    assert code == 0, executed
    job_id = executed["job_id"]
    code, listing = cli.json("jobs", "list", "--function", name, "--status", "success")
    assert code == 0
    assert [j["id"] for j in listing["items"]] == [job_id]
    code, listing = cli.json("jobs", "list", "--function", name, "--status", "failed")
    assert listing["items"] == []
    code, listing = cli.json("jobs", "list", "--function", name, "--created-after", "2100-01-01")
    assert listing["items"] == []
    code, listing = cli.json("jobs", "list", "--function", name, "--created-before", "2100-01-01")
    assert [j["id"] for j in listing["items"]] == [job_id]
    code, listing = cli.json("packages", "list", "--search", name)
    assert [p["name"] for p in listing["items"]] == [name]
    code, listing = cli.json("functions", "list", "--search", f"{name}/scale")
    assert [f"{f['package']}/{f['name']}" for f in listing["items"]] == [f"{name}/scale"]
    code, listing = cli.json("workflows", "list", "--search", unique("nothing"))
    assert listing["items"] == []
    code, listing = cli.json("runs", "list", "--started-after", "2100-01-01")
    assert listing["items"] == []
    code, _, err = cli("jobs", "list", "--status", "sleeping")
    assert code != 0
    assert "ValidationError" in err
    assert "Traceback" not in err
