"""`Client` against a real server (uvicorn on loopback, real workers and sandboxes), on
SQLite and PostgreSQL: every method family, and the typed answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import pytest

from calcgraph.client import Client, Conflict, NotFound, PermissionDenied, quantity
from calcgraph.client.operations import Call
from calcgraph.demo import DEMO_INPUTS
from tests.client.conftest import DemoCopy, Served, unique
from tests.client.packages import git_repository, tools_package

R = TypeVar("R")

BEAM_INPUTS = {
    "length": quantity(3, "m"),
    "force": quantity(12, "kN"),
    "youngs_modulus": quantity(210, "GPa"),
    "second_moment": 8.356e-5,
}


def beam_outputs() -> dict[str, float]:
    length, force, modulus, inertia = 3.0, 12e3, 210e9, 8.356e-5
    return {
        "deflection": force * length**3 / (3 * modulus * inertia),
        "moment": force * length,
        "shear": force,
    }


@pytest.fixture
def alice(served: Served) -> Client:
    with Client(served.url, served.token("alice")) as client:
        yield client  # type: ignore[misc]


class TestService:
    def test_health_and_types_need_no_token(self, served: Served, backend: str) -> None:
        with Client(served.url, token=None) as anonymous:
            health = anonymous.health()
            assert health.status == "ok"
            assert health.database == backend
            allowed = anonymous.check_connection("list[Force]", "list[Numeric]")
            assert allowed.allowed
            assert "Force -> Float -> Numeric" in allowed.reason
            refused = anonymous.check_connection("Force", "Length")
            assert refused.compatibility == "REFUSED"
            assert not refused.allowed
            assert "Force" in {t["name"] for t in anonymous.list_types()}

    def test_me(self, alice: Client) -> None:
        me = alice.me()
        assert me.username == "alice"
        assert "user" in me.roles


class TestPackages:
    def test_publish_directory_then_read_back(self, alice: Client, demo: DemoCopy) -> None:
        report = alice.publish_directory(demo.directory, visibility="private")
        assert report.package == demo.name
        assert report.package_version == "1.2.0"
        names = {f.name: f for f in report.functions}
        assert set(names) == {"cantilever", "stress_check", "deflection_check", "verdict"}
        assert {f.status for f in report.functions} == {"new"}

        with pytest.raises(Conflict, match="already exists") as refused:
            alice.publish_directory(demo.directory)
        assert refused.value.status == 409
        assert refused.value.kind == "Conflict"

        package = alice.get_package(report.package_id)
        assert (package.name, package.visibility) == (demo.name, "private")
        detail = alice.get_function(names["cantilever"].id)
        assert detail.typed
        assert detail.inputs is not None
        assert detail.inputs["force"]["type"] == "Force"
        assert detail.current_version == "1.2.0"
        listed = {f.id for f in alice.iterate(alice.list_functions, limit=500)}
        assert {f.id for f in report.functions} <= listed

    def test_listing_pages_follow_the_cursor(self, alice: Client, tmp_path: Path) -> None:
        published = {alice.publish_directory(tools_package(tmp_path)[1]).package_id}
        published.add(alice.publish_directory(tools_package(tmp_path)[1]).package_id)
        first = alice.list_packages(limit=1)
        assert len(first.items) == 1
        assert first.next_cursor
        everything = [p.id for p in alice.iterate(alice.list_packages, limit=1)]
        assert everything[0] == first.items[0].id
        assert len(everything) == len(set(everything)) >= 2
        assert published <= set(everything)
        assert everything == [p.id for p in alice.list_packages(limit=500).items]

    def test_publish_package_from_memory(self, alice: Client, tmp_path: Path) -> None:
        name, directory = tools_package(tmp_path)
        manifest = (directory / "calcgraph.yaml").read_text()
        report = alice.publish_package(manifest, {"tools.py": (directory / "tools.py").read_text()})
        assert report.package == name
        assert {f.name for f in report.functions} == {"scale", "boom", "untyped", "slow"}

    def test_deploy_git_for_an_organization(
        self, alice: Client, served: Served, tmp_path: Path
    ) -> None:
        name, url = git_repository(tmp_path)
        team = unique("team")
        organization = alice.create_organization(team, "Team")
        assert [(o.username, o.role) for o in organization.members] == [("alice", "owner")]
        report = alice.deploy_git(url, "v1.0.0", visibility="internal", organization=team)
        assert (report.package, report.package_version, report.git_ref) == (name, "1.0.0", "v1.0.0")
        assert report.git_commit is not None
        assert len(report.git_commit) == 40
        assert alice.get_package(report.package_id).visibility == "internal"
        with Client(alice.url, served.token("bob")) as bob:
            with pytest.raises(PermissionDenied):
                bob.get_package(report.package_id)
            assert alice.add_member(team, "bob").role == "member"
            assert bob.get_package(report.package_id).name == name
            alice.remove_member(team, "bob")
            assert [o.username for o in alice.get_organization(team).members] == ["alice"]
            with pytest.raises(PermissionDenied):
                bob.get_package(report.package_id)


class TestExecute:
    def test_every_addressing_form(self, alice: Client, demo: DemoCopy) -> None:
        report = alice.publish_directory(demo.directory)
        cantilever = next(f for f in report.functions if f.name == "cantilever")
        expected = beam_outputs()
        for address, version in [
            (f"{demo.name}/cantilever", None),
            (f"{demo.name}/cantilever@1.2.0", None),
            (f"{demo.name}/cantilever", "latest"),
            (cantilever.id, None),
            (cantilever.version_id, None),
        ]:
            result = alice.execute(address, BEAM_INPUTS, version=version)
            assert result.status == "success", (address, result)
            assert result.outputs == pytest.approx(expected)
        with pytest.raises(ValueError, match="two versions"):
            alice.execute(f"{demo.name}/cantilever@1.2.0", {}, version="1.0.0")

    def test_queued_job_is_awaited_by_polling(self, alice: Client, tmp_path: Path) -> None:
        name, directory = tools_package(tmp_path)
        alice.publish_directory(directory)
        inputs = {"length": quantity(250, "mm"), "factor": 4}
        answer = alice.execute(f"{name}/scale", inputs, wait=0)
        assert answer.status in {"queued", "running", "success"}
        job = alice.wait_for_job(answer.job_id, period=0.1, timeout=30)
        assert job.status == "success"
        assert job.done
        assert job.outputs == pytest.approx({"scaled": 1.0})
        assert job.inputs == inputs  # kept verbatim, converted for the function only
        assert alice.get_job(job.id).id == job.id
        assert job.id in {j.id for j in alice.iterate(alice.list_jobs, limit=2)}

    def test_a_failing_function_is_a_failed_result(self, alice: Client, tmp_path: Path) -> None:
        name, directory = tools_package(tmp_path)
        alice.publish_directory(directory)
        result = alice.execute(f"{name}/boom", {"x": 2})
        assert result.status == "failed"
        assert result.done
        assert result.error is not None
        assert result.error["kind"] == "user_error"
        job = alice.get_job(result.job_id)
        assert "bad x: 2" in (job.logs or "") + str(job.error)


class TestWorkflowsAndRuns:
    def test_workflow_lifecycle(self, alice: Client, demo: DemoCopy) -> None:
        alice.publish_directory(demo.directory)
        assert alice.validate_workflow(demo.graph).valid
        slug = unique("beam")
        created = alice.create_workflow(slug, "Beam check", demo.graph)
        assert (created.slug, created.version) == (slug, 1)
        assert {n["node_key"] for n in created.input_nodes} == set(DEMO_INPUTS)
        assert alice.get_workflow(slug).version_id == created.version_id
        updated = alice.update_workflow(slug, demo.graph)
        assert updated.version == 2
        assert updated.version_id != created.version_id
        assert slug in {w.slug for w in alice.iterate(alice.list_workflows, limit=500)}

    def test_run_until_done_long_polls_to_completion(self, alice: Client, demo: DemoCopy) -> None:
        alice.publish_directory(demo.directory)
        slug = unique("beam")
        alice.create_workflow(slug, "Beam check", demo.graph)
        run = alice.start_run(slug, DEMO_INPUTS)
        assert run.status in {"pending", "running"}
        assert {s.status for s in run.node_states.values()} == {"pending"}
        updates: list[str] = []
        final = alice.run_until_done(run.id, on_update=lambda r: updates.append(r.status))
        assert final.status == "completed"
        assert final.done
        assert updates[-1] == "completed"
        assert len(updates) >= 2
        assert final.terminal_outputs is not None
        assert final.terminal_outputs["verdict"]["verdict"] == "PASS (stiffness governs)"
        assert {s.status for s in final.node_states.values()} == {"success"}
        assert alice.get_run(run.id).model_dump() == final.model_dump()
        plan = alice.get_run_plan(run.id)
        assert plan.run_id == run.id
        assert plan.plan is not None
        assert plan.plan["chains"]
        assert alice.tick(run.id).revision == final.revision  # idempotent once terminal
        done = alice.list_runs(status=["completed"], workflow=slug, limit=500)
        assert run.id in {r.id for r in done.items}
        assert alice.list_runs(status=["failed"], workflow=slug).items == []

    def test_polling_every_period_without_long_poll(self, alice: Client, demo: DemoCopy) -> None:
        alice.publish_directory(demo.directory)
        slug = unique("beam")
        alice.create_workflow(slug, "Beam check", demo.graph)
        run = alice.start_run(slug, DEMO_INPUTS)
        final = alice.run_until_done(run.id, period=0.2, long_poll=None, timeout=60)
        assert final.status == "completed"

    def test_a_failed_node_fails_the_run(self, alice: Client, tmp_path: Path) -> None:
        name, directory = tools_package(tmp_path)
        alice.publish_directory(directory)
        graph = {
            "nodes": [
                {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
                {
                    "node_key": "fails",
                    "kind": "function",
                    "function": f"{name}/boom",
                    "input_bindings": {
                        "x": {"source": "input_node", "input_key": "x", "from_port": "value"}
                    },
                },
            ]
        }
        slug = unique("boom")
        alice.create_workflow(slug, "Boom", graph)
        final = alice.run_until_done(alice.start_run(slug, {"x": 1.5}).id)
        assert final.status == "failed"
        assert final.first_failed_node_key == "fails"
        assert final.node_states["fails"].error is not None

    def test_unknown_run(self, alice: Client) -> None:
        with pytest.raises(NotFound):
            alice.run_until_done("no-such-run")


class CountingClient(Client):
    """Counts the calls that reach the server, by path suffix."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []

    def send(self, call: Call[R]) -> R:
        self.calls.append(f"{call.method} {call.path}")
        return super().send(call)


def slow_chain(name: str) -> dict[str, Any]:
    """Two `slow` nodes in a row: the run lasts about 2 x 0.8 s."""
    binding = {"source": "input_node", "input_key": "s", "from_port": "value"}
    return {
        "nodes": [
            {"node_key": "s", "kind": "input", "input_spec": {"type_expr": "Float"}},
            {
                "node_key": "first",
                "kind": "function",
                "function": f"{name}/slow",
                "input_bindings": {"seconds": binding},
            },
            {
                "node_key": "second",
                "kind": "function",
                "function": f"{name}/slow",
                "input_bindings": {
                    "seconds": {"source": "edge", "from_node_key": "first", "from_port": "seconds"}
                },
            },
        ]
    }


def test_long_poll_ticks_only_when_something_happened(served: Served, tmp_path: Path) -> None:
    name, directory = tools_package(tmp_path)
    with CountingClient(served.url, served.token("alice")) as cg:
        cg.publish_directory(directory)
        slug = unique("slow")
        cg.create_workflow(slug, "Slow", slow_chain(name))
        run = cg.start_run(slug, {"s": 0.8})
        cg.calls.clear()
        final = cg.run_until_done(run.id, period=0.05)
    assert final.status == "completed"
    ticks = [c for c in cg.calls if c.endswith("/tick")]
    # Polling every 0.05 s would tick ~30 times over 1.6 s; a long-polled tick returns when a
    # job of the run has finished, so each node costs about one tick (plus chain batching).
    assert 1 <= len(ticks) <= 5, ticks
    assert ticks == cg.calls  # nothing but ticks
