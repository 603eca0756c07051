"""The `docker` builder through `POST /functions`: an image from the local base image, with the
requirements importable under the sandbox's `python3 -I`, refused images removed."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from calcgraph.builds.docker_builder import FUNCTION_LABEL, docker_client
from calcgraph.builds.local import LocalBuilds
from calcgraph.services import services_of
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.builds.build_fixtures import CLEAN, VULNERABLE, build_settings

Bearer = Callable[..., dict[str, str]]
CODE = "import calcgraph_fixture_clean_a as a\n\ndef main():\n    return {'value': a.VALUE}\n"


def _engine(settings: Settings) -> Any:
    try:
        client = docker_client(settings.docker_host, timeout=10)
        client.images.get(settings.sandbox_base_image)
    except Exception as exc:  # any reason the engine or the base image is missing
        pytest.skip(f"no Docker engine with {settings.sandbox_base_image}: {exc}")
    return client


@pytest.fixture
def settings(
    database_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> Settings:
    base = Settings(database_url=database_url, oidc_issuer=identity_provider.issuer, _env_file=None)
    return build_settings(
        base, tmp_path, sandbox="docker", function_image_repository="calcgraph-test/fn"
    )


@pytest.fixture
def docker_engine(settings: Settings) -> Iterator[Any]:
    client = _engine(settings)
    yield client
    for image in client.images.list(name="calcgraph-test/fn/*"):
        for tag in image.tags:
            client.images.remove(tag)
    client.close()


async def test_docker_build_runs_its_requirements_and_refusals_leave_no_image(
    client: httpx.AsyncClient, bearer: Bearer, docker_engine: Any
) -> None:
    response = await client.post(
        "/functions",
        json={"name": "dockered", "code": CODE, "requirements": [f"{CLEAN[0][0]}=={CLEAN[0][1]}"]},
        headers=bearer("alice"),
    )
    assert response.status_code == 201, response.text
    built = response.json()
    assert built["docker_image"].startswith("docker:calcgraph-test/fn/dockered:")
    assert built["image_size"].endswith(" MB")
    image = built["docker_image"].removeprefix("docker:")
    assert docker_engine.images.get(image).labels[FUNCTION_LABEL] == "dockered"
    ran = await asyncio.to_thread(
        subprocess.run,
        ["docker", "run", "--rm", "--network", "none", "--read-only", image, "python3", "-I",
         "-c", "import sys; sys.path.insert(0, '/opt/calcgraph/code'); import main; "
         "print(main.main()['value'])"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "calcgraph-fixture-clean-a 1.0.0"

    refused = await client.post(
        "/functions",
        json={
            "name": "dockered",
            "code": CODE,
            "requirements": [f"{VULNERABLE[0]}=={VULNERABLE[1]}", f"{CLEAN[0][0]}=={CLEAN[0][1]}"],
        },
        headers=bearer("alice"),
    )
    assert refused.status_code == 400
    assert refused.json()["vulnerabilities"]["critical"] == 1
    tags = {t for i in docker_engine.images.list(name="calcgraph-test/fn/dockered") for t in i.tags}
    assert tags == {image}
    log = await client.get(
        f"/functions/{built['function_id']}/builds/{built['build_id']}/log",
        headers=bearer("alice"),
    )
    assert "network none" in log.text
    assert "kept in the local engine" in log.text


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    """A registry on loopback from Debian's `docker-registry` package, for this test only."""
    program = shutil.which("docker-registry")
    if program is None:
        pytest.skip("no docker-registry program (Debian package docker-registry)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "registry.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {tmp_path / 'registry'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    process = subprocess.Popen([program, "serve", str(config)], stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    try:
        for _ in range(50):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://{address}/v2/", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        yield address
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_docker_build_is_pushed_to_the_configured_registry(
    app: Any, bearer: Bearer, docker_engine: Any, registry: str
) -> None:
    services = services_of(app)
    pushing = services.settings.model_copy(update={"sandbox_registry": registry})
    app.state.services = replace(services, settings=pushing, builds=LocalBuilds(pushing))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test") as client:
        response = await client.post(
            "/functions",
            json={"name": "pushed", "code": "def main():\n    return {'v': 1}\n"},
            headers=bearer("alice"),
        )
        assert response.status_code == 201, response.text
        built = response.json()
        log = await client.get(
            f"/functions/{built['function_id']}/builds/{built['build_id']}/log",
            headers=bearer("alice"),
        )
    image = built["docker_image"].removeprefix("docker:")
    assert f"pushed {registry}/{image}" in log.text
    async with httpx.AsyncClient(timeout=5) as plain:
        catalog = (await plain.get(f"http://{registry}/v2/_catalog")).json()
    assert catalog["repositories"] == ["calcgraph-test/fn/pushed"]
    docker_engine.images.remove(f"{registry}/{image}")
