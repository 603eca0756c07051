"""A function built from submitted code (POST /functions) runs with its own dependencies.

Issue 6 builds the artifact, issue 5 runs jobs: this is the seam. The handler imports a
dependency that exists only in the build's artifact, so it can only succeed if the worker
mounts the build's dependencies into the sandbox.
"""

from __future__ import annotations

from pathlib import Path

from calcgraph.domain.builds.models import Build
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.builds.build_fixtures import CLEAN, build_settings
from tests.execution.conftest import default_sandbox, running_platform

CODE = (
    "import calcgraph_fixture_clean_a\n"
    "\n"
    "def main(x):\n"
    "    return {'y': x * 2, 'dependency': calcgraph_fixture_clean_a.VALUE}\n"
)
BUILD_FIELDS = {
    "scanner",
    "advisory_db_path",
    "build_dir",
    "build_no_index",
    "build_find_links",
    "build_timeout_seconds",
}
IO = {
    "inputs": {"x": {"type": "Length", "description": "x", "required": True}},
    "outputs": {
        "y": {"type": "Length", "description": "twice x"},
        "dependency": {"type": "String", "description": "what the dependency says"},
    },
}


async def test_a_built_function_runs_with_its_dependencies(
    exec_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> None:
    name, version = CLEAN[0]
    sandbox = default_sandbox()
    # Local wheels only and the OSV fixture: the build settings the builds tests use.
    overrides = build_settings(Settings(_env_file=None), tmp_path).model_dump(  # type: ignore[call-arg]
        include=BUILD_FIELDS
    )
    async with running_platform(
        exec_url, identity_provider, tmp_path, sandbox, **overrides
    ) as platform:
        await platform.user("alice")
        built = await platform.client.post(
            "/functions",
            json={
                "name": "twice-with-dep",
                "code": CODE,
                "handler": "main:main",
                "requirements": [f"{name}=={version}"],
                **IO,
            },
            headers=platform.headers("alice"),
        )
        assert built.status_code == 201, built.text
        function_id = built.json()["function_id"]
        response = await platform.execute(
            f"/functions/{function_id}/execute", {"x": {"value": 150, "unit": "mm"}}, wait=30
        )
        assert response.status_code == 200, response.text
        job = response.json()
        assert job["status"] == "success", job
        assert job["outputs"] == {"y": 0.3, "dependency": f"{name} {version}"}
        async with platform.database.read_session() as session:
            build = await session.get(Build, built.json()["build_id"])
        assert build is not None
        assert build.docker_image == built.json()["docker_image"]
