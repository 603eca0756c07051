"""`POST /functions` end to end on both databases: builds, refusals, versions, logs (issue 6)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from calcgraph.builds.artifact import artifact_path, runnable
from calcgraph.builds.local import LocalBuilds
from calcgraph.db.engine import Database
from calcgraph.domain.builds.repository import BuildRepository
from calcgraph.services import services_of
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.builds.build_fixtures import CLEAN, HIGH, VULNERABLE, build_settings

Bearer = Callable[..., dict[str, str]]
CODE = "def main(x):\n    return {'y': x * 2}\n"
IO: dict[str, Any] = {
    "inputs": {"x": {"type": "Float", "description": "x", "required": True}},
    "outputs": {"y": {"type": "Float", "description": "y"}},
}


@pytest.fixture
def settings(
    database_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> Settings:
    base = Settings(database_url=database_url, oidc_issuer=identity_provider.issuer, _env_file=None)
    return build_settings(base, tmp_path)


def body(name: str = "double", code: str = CODE, **extra: Any) -> dict[str, Any]:
    return {"name": name, "code": code, "handler": "main:main", **IO, **extra}


async def submit(client: httpx.AsyncClient, headers: dict[str, str], **kw: Any) -> httpx.Response:
    return await client.post("/functions", json=body(**kw), headers=headers)


def pins(*dists: tuple[str, str]) -> list[str]:
    return [f"{name}=={version}" for name, version in dists]


async def test_build_without_dependencies_answers_the_spec_fields(
    client: httpx.AsyncClient, bearer: Bearer, settings: Settings
) -> None:
    response = await submit(client, bearer("alice"))
    assert response.status_code == 201, response.text
    built = response.json()
    assert built["status"] == "ready"
    assert re.fullmatch(r"artifact:[0-9a-f]{64}", built["docker_image"])
    assert re.fullmatch(r"\d+ B|\d+\.\d (kB|MB|GB)", built["image_size"])
    assert re.fullmatch(r"\d+\.\ds", built["build_time"])
    assert built["vulnerabilities"] == {"critical": 0, "high": 0, "warnings": []}
    assert (built["version"], built["version_status"]) == ("1.0.0", "new")
    directory = artifact_path(settings.build_dir, built["docker_image"])
    assert (directory / "code" / "main.py").read_text() == CODE
    assert list((directory / "deps").iterdir()) == []
    detail = await client.get(f"/functions/{built['function_id']}", headers=bearer("alice"))
    assert detail.json()["current_version"] == "1.0.0"
    assert detail.json()["typed"] is True


async def test_build_with_three_small_wheels_and_a_high_warning(
    client: httpx.AsyncClient, bearer: Bearer, settings: Settings
) -> None:
    response = await submit(client, bearer("alice"), requirements=pins(*CLEAN[:2], HIGH))
    assert response.status_code == 201, response.text
    built = response.json()
    assert built["vulnerabilities"]["critical"] == 0
    assert built["vulnerabilities"]["high"] == 1
    assert "CGFX-2026-0003" in built["vulnerabilities"]["warnings"][0]
    deps = artifact_path(settings.build_dir, built["docker_image"]) / "deps"
    assert {p.name for p in deps.iterdir() if not p.name.endswith(".dist-info")} == {
        "calcgraph_fixture_clean_a", "calcgraph_fixture_clean_b", "calcgraph_fixture_highlib"
    }  # fmt: skip
    log = await client.get(
        f"/functions/{built['function_id']}/builds/{built['build_id']}/log",
        headers=bearer("alice"),
    )
    assert log.status_code == 200
    assert "pip install" in log.text
    assert "--only-binary :all:" in log.text
    assert "warning: calcgraph-fixture-highlib 1.2.0: CGFX-2026-0003" in log.text
    hidden = await client.get(
        f"/functions/{built['function_id']}/builds/{built['build_id']}/log",
        headers=bearer("bob"),
    )
    assert hidden.status_code == 403
    assert hidden.json()["detail"].startswith("PermissionDenied: ")
    missing = await client.get(
        f"/functions/{built['function_id']}/builds/nothing/log", headers=bearer("alice")
    )
    assert missing.status_code == 404


async def test_resubmission_follows_the_auto_rule(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    first = (await submit(client, bearer("alice"))).json()
    same = (await submit(client, bearer("alice"))).json()
    assert (same["version"], same["version_status"]) == ("1.0.0", "unchanged")
    assert same["function_version_id"] == first["function_version_id"]
    assert same["docker_image"] == first["docker_image"]  # content-addressed
    changed = (await submit(client, bearer("alice"), code=CODE.replace("2", "3"))).json()
    assert (changed["version"], changed["version_status"]) == ("1.0.1", "updated")
    # New requirements change what runs, so they bump the version too.
    deps = (
        await submit(
            client, bearer("alice"), code=CODE.replace("2", "3"), requirements=pins(CLEAN[0])
        )
    ).json()
    assert (deps["version"], deps["version_status"]) == ("1.0.2", "updated")
    assert {first["function_id"], changed["function_id"], deps["function_id"]} == {
        first["function_id"]
    }
    versions = (await client.get("/packages/double/versions", headers=bearer("alice"))).json()
    assert [v["version"] for v in versions["versions"]] == ["1.0.0", "1.0.1", "1.0.2", "1.0.3"]
    taken = await submit(client, bearer("bob"))
    assert taken.status_code == 403
    assert taken.json()["detail"].startswith("PermissionDenied: ")


async def test_scan_refusal_keeps_the_previous_version_and_records_the_reason(
    client: httpx.AsyncClient, bearer: Bearer, database: Database, settings: Settings
) -> None:
    ready = (await submit(client, bearer("alice"))).json()
    response = await submit(
        client, bearer("alice"), code=CODE.replace("2", "4"), requirements=pins(VULNERABLE)
    )
    assert response.status_code == 400
    refused = response.json()
    assert refused["detail"].startswith("InvalidRequest: ")
    assert "CRITICAL" in refused["detail"]
    assert refused["vulnerabilities"]["critical"] == 1
    assert "CGFX-2026-0001" in refused["vulnerabilities"]["warnings"][0]
    assert refused["function_id"] == ready["function_id"]
    detail = (
        await client.get(f"/functions/{ready['function_id']}", headers=bearer("alice"))
    ).json()
    assert detail["current_version"] == "1.0.0"
    assert detail["current_version_id"] == ready["function_version_id"]
    versions = (await client.get("/packages/double/versions", headers=bearer("alice"))).json()
    assert [v["version"] for v in versions["versions"]] == ["1.0.0"]
    async with database.read_session() as session:
        record = await BuildRepository.from_session(session).get(refused["build_id"])
    assert record is not None
    assert record.build_status == "refused"
    assert record.reason is not None
    assert "CGFX-2026-0001" in record.reason
    assert record.function_version_id is None
    assert record.docker_image is None
    assert record.vulnerabilities == refused["vulnerabilities"]
    # Nothing runnable of the refused build is left behind.
    stored = list((settings.build_dir / "artifacts").iterdir())
    assert [p.name for p in stored] == [ready["docker_image"].removeprefix("artifact:")]
    log = await client.get(
        f"/functions/{ready['function_id']}/builds/{refused['build_id']}/log",
        headers=bearer("alice"),
    )
    assert "refused at scan" in log.text


async def test_first_submission_refused_at_scan_leaves_a_function_without_version(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    response = await submit(client, bearer("alice"), name="risky", requirements=pins(VULNERABLE))
    assert response.status_code == 400
    function_id = response.json()["function_id"]
    detail = (await client.get(f"/functions/{function_id}", headers=bearer("alice"))).json()
    assert detail["current_version"] is None
    assert (await client.get(f"/functions/{function_id}", headers=bearer("bob"))).status_code == 403


async def test_a_requirement_without_a_wheel_fails_the_build(
    client: httpx.AsyncClient, bearer: Bearer, database: Database
) -> None:
    response = await submit(client, bearer("alice"), requirements=["calcgraph-fixture-absent==1"])
    assert response.status_code == 400
    failed = response.json()
    assert "installing the requirements failed" in failed["detail"]
    async with database.read_session() as session:
        record = await BuildRepository.from_session(session).get(failed["build_id"])
    assert record is not None
    assert record.build_status == "failed"
    assert record.reason is not None


@pytest.mark.parametrize(
    ("code", "requirements", "rule", "line"),
    [
        ("def main(x):\n    return x +\n", [], "rule syntax", 2),
        ("import os\n\ndef main(x):\n    return x\n", [], "os", 1),
        ("def main(x):\n    import subprocess\n    return x\n", [], "subprocess", 2),
        ("def main(x):\n    return x\n\nimport socket\n", [], "socket", 4),
        ("def main(x):\n    return eval('x')\n", [], "eval", 2),
        ("def main(x):\n    return x\n" + "#" * 1_000_000 + "\n", [], "rule code-size", None),
        ("def main(x):\n    return x\n", [f"pkg{i}==1.0" for i in range(50)], "50", None),
    ],
)
async def test_each_validation_rule_is_a_422_naming_rule_and_line(
    client: httpx.AsyncClient,
    bearer: Bearer,
    code: str,
    requirements: list[str],
    rule: str,
    line: int | None,
) -> None:
    response = await submit(client, bearer("alice"), code=code, requirements=requirements)
    assert response.status_code == 422, response.text
    refused = response.json()
    assert refused["detail"].startswith("ValidationError: ")
    assert rule in refused["detail"]
    if line is not None:
        assert f"line {line}" in refused["detail"]
        assert any(e["loc"][:3] == ["body", "code", "line"] and e["loc"][3] == line
                   for e in refused["errors"])  # fmt: skip
    # Nothing was built or recorded: the function does not exist.
    listing = (await client.get("/functions", headers=bearer("alice"))).json()
    assert listing["items"] == []


async def test_the_build_timeout_fails_the_build(
    app: Any, client: httpx.AsyncClient, bearer: Bearer, database: Database
) -> None:
    services = services_of(app)
    quick = services.settings.model_copy(update={"build_timeout_seconds": 1e-6})
    app.state.services = replace(services, settings=quick, builds=LocalBuilds(quick))
    response = await submit(client, bearer("alice"), requirements=pins(CLEAN[0]))
    assert response.status_code == 400
    failed = response.json()
    assert "did not finish within" in failed["detail"]
    async with database.read_session() as session:
        record = await BuildRepository.from_session(session).get(failed["build_id"])
    assert record is not None
    assert record.build_status == "failed"


def test_runnable_paths_of_a_reference(tmp_path: Path) -> None:
    digest = "ab" * 32
    artifact = runnable(tmp_path, f"artifact:{digest}")
    assert artifact.code_dir == tmp_path / "artifacts" / digest / "code"
    assert artifact.deps_dir == tmp_path / "artifacts" / digest / "deps"
    assert artifact.image is None
    assert runnable(tmp_path, "docker:calcgraph/fn/f:1").image == "calcgraph/fn/f:1"
