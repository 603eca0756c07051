"""The execute endpoints end to end: addressing, typed inputs, units, answers per contract 4."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from calcgraph.demo import package_files
from tests.execution.conftest import Platform
from tests.execution.factories import deploy

pytestmark = pytest.mark.db

JOB_FIELDS = {
    "id",
    "function_id",
    "function_version_id",
    "package_id",
    "status",
    "inputs",
    "outputs",
    "error",
    "logs",
    "created_at",
    "started_at",
    "finished_at",
    "cache_hit",
}


class TestAddressing:
    async def test_every_form_runs_the_named_version(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        first = await deploy(platform.database, alice, version="1.0.0")
        second = await deploy(
            platform.database,
            alice,
            version="1.1.0",
            package=first,
            files={"main.py": "def add(x, y):\n    return {'sum': 100 + x + y}\n"},
            functions={
                "add": {
                    "handler": "main:add",
                    "inputs": {"x": {"type": "Float"}, "y": {"type": "Float"}},
                    "outputs": {"sum": {"type": "Float"}},
                }
            },
        )
        name, pid = first.package_name, first.package_id
        cases = {
            f"/packages/{pid}/functions/add/execute": 103.0,
            f"/packages/{name}/functions/add/execute": 103.0,
            f"/packages/{name}/functions/add@latest/execute": 103.0,
            f"/packages/{name}/functions/add@1.0.0/execute": 3.0,
            f"/packages/{name}/functions/add@v1.1.0/execute": 103.0,
            f"/packages/{name}@1.0.0/functions/add/execute": 3.0,
            f"/packages/{name}@1.1.0/functions/add/execute": 103.0,
            f"/functions/{first.functions['add']}/execute": 103.0,
            f"/functions/{first.versions['add']}/execute": 3.0,
            f"/functions/{second.versions['add']}/execute": 103.0,
        }
        for path, expected in cases.items():
            response = await platform.execute(path, {"x": 1, "y": 2})
            assert response.status_code == 200, (path, response.text)
            body = response.json()
            assert body["status"] == "success", (path, body)
            assert body["outputs"] == {"sum": expected}, path

    async def test_unknown_version_and_function_are_404(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        name = deployed.package_name
        for path in (
            f"/packages/{name}/functions/add@9.9.9/execute",
            f"/packages/{name}@9.9.9/functions/add/execute",
            f"/packages/{name}/functions/nope/execute",
            "/packages/no-such-package/functions/add/execute",
            "/functions/00000000-0000-0000-0000-000000000000/execute",
        ):
            response = await platform.execute(path, {"x": 1})
            assert response.status_code == 404, (path, response.text)
            assert response.json()["detail"].startswith("NotFound: ")

    async def test_hidden_package_is_403(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice, visibility="private")
        bob = platform.headers("bob")
        for path in (
            f"/packages/{deployed.package_id}/functions/add/execute",
            f"/packages/{deployed.package_name}/functions/add@1.0.0/execute",
            f"/functions/{deployed.functions['add']}/execute",
        ):
            response = await platform.execute(path, {"x": 1, "y": 2}, headers=bob)
            assert response.status_code == 403, response.text
            assert response.json()["detail"].startswith("PermissionDenied: ")
        public = await deploy(platform.database, alice, visibility="public")
        response = await platform.execute(
            f"/packages/{public.package_name}/functions/add/execute", {"x": 1, "y": 2}, headers=bob
        )
        assert response.status_code == 200


class TestInputs:
    async def test_every_port_problem_is_422(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        response = await platform.execute(
            f"/packages/{deployed.package_name}/functions/double/execute",
            {"length": {"value": 3, "unit": "kg"}, "extra": 1},
        )
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["detail"].startswith("ValidationError: ")
        locs = {tuple(e["loc"]) for e in body["errors"]}
        assert ("body", "inputs", "extra") in locs
        assert ("body", "inputs", "length", "unit") in locs
        missing = await platform.execute(
            f"/packages/{deployed.package_name}/functions/add/execute", {"y": "two"}
        )
        assert missing.status_code == 422
        errors = {tuple(e["loc"]): e["msg"] for e in missing.json()["errors"]}
        assert errors[("body", "inputs", "x")] == "required input is missing"
        assert ("body", "inputs", "y") in errors

    async def test_quantities_are_converted_to_si_and_inputs_kept_verbatim(
        self, platform: Platform
    ) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        inputs = {"length": {"value": 250, "unit": "mm"}}
        response = await platform.execute(
            f"/packages/{deployed.package_name}/functions/double/execute", inputs
        )
        assert response.status_code == 200, response.text
        assert response.json()["outputs"] == {"doubled": 0.5}
        job = (
            await platform.client.get(
                f"/jobs/{response.json()['job_id']}", headers=platform.headers("alice")
            )
        ).json()
        assert job["inputs"] == inputs

    async def test_the_demo_cantilever_in_engineering_units(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        files = package_files()
        functions = {
            "cantilever": {
                "handler": "beam:cantilever",
                "inputs": {
                    "length": {"type": "Length"},
                    "force": {"type": "Force"},
                    "youngs_modulus": {"type": "Pressure"},
                    "second_moment": {"type": "Float"},
                },
                "outputs": {
                    "deflection": {"type": "Length"},
                    "moment": {"type": "Moment"},
                    "shear": {"type": "Force"},
                },
            }
        }
        deployed = await deploy(platform.database, alice, files=files, functions=functions)
        response = await platform.execute(
            f"/packages/{deployed.package_name}/functions/cantilever/execute",
            {
                "length": {"value": 3, "unit": "m"},
                "force": {"value": 12, "unit": "kN"},
                "youngs_modulus": {"value": 210, "unit": "GPa"},
                "second_moment": 8.356e-5,
            },
        )
        assert response.status_code == 200, response.text
        outputs = response.json()["outputs"]
        assert outputs["moment"] == pytest.approx(36_000.0)
        expected = 12_000 * 3**3 / (3 * 210e9 * 8.356e-5)
        assert outputs["deflection"] == pytest.approx(expected)

    async def test_an_untyped_function_takes_inputs_verbatim(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        inputs = {"anything": [1, "two", {"three": 3}]}
        response = await platform.execute(
            f"/packages/{deployed.package_name}/functions/echo/execute", inputs
        )
        assert response.status_code == 200, response.text
        assert response.json()["outputs"] == {"echo": inputs}


class TestAnswers:
    async def test_wait_zero_answers_202_then_the_job_finishes(self, platform: Platform) -> None:
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        response = await platform.execute(
            f"/packages/{deployed.package_name}/functions/add/execute", {"x": 1, "y": 2}, wait=0
        )
        assert response.status_code == 202, response.text
        body = response.json()
        assert set(body) == {"job_id", "status"}
        assert body["status"] in ("queued", "running")
        job: dict[str, Any] = {}
        for _ in range(200):
            job = (
                await platform.client.get(
                    f"/jobs/{body['job_id']}", headers=platform.headers("alice")
                )
            ).json()
            if job["status"] == "success":
                break
            await asyncio.sleep(0.05)
        assert job["status"] == "success"
        assert JOB_FIELDS <= set(job)
        assert job["outputs"] == {"sum": 3.0}
        assert job["cache_hit"] is False
        assert job["started_at"]
        assert job["finished_at"]
        assert job["created_at"]
        assert job["function_version_id"] == deployed.versions["add"]
        listed = (await platform.client.get("/jobs", headers=platform.headers("alice"))).json()
        assert body["job_id"] in {j["id"] for j in listed["items"]}

    async def test_a_user_error_is_a_failed_job_with_the_traceback_in_the_logs(
        self, any_sandbox_platform: Platform
    ) -> None:
        platform = any_sandbox_platform
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        path = f"/packages/{deployed.package_name}/functions/boom/execute"
        response = await platform.execute(path, {"x": 7})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["status"] == "failed"
        assert body["error"]["kind"] == "user_error"
        assert "bad x: 7" in body["error"]["message"]
        job = (
            await platform.client.get(f"/jobs/{body['job_id']}", headers=platform.headers("alice"))
        ).json()
        assert "about to fail with 7" in job["logs"]
        assert "Traceback" in job["logs"]
        assert 'raise ValueError(f"bad x: {x}")' in job["logs"]
        # Failures are never cached: the same call runs again.
        runs = platform.runtime.runs
        again = (await platform.execute(path, {"x": 7})).json()
        assert again["status"] == "failed"
        assert platform.runtime.runs == runs + 1

    async def test_success_on_every_sandbox(self, any_sandbox_platform: Platform) -> None:
        platform = any_sandbox_platform
        alice = await platform.user("alice")
        deployed = await deploy(platform.database, alice)
        response = await platform.execute(
            f"/packages/{deployed.package_name}/functions/add/execute", {"x": 2, "y": 3}
        )
        assert response.status_code == 200, response.text
        assert response.json()["outputs"] == {"sum": 5.0}
