"""Docker images per function version: local first, then the registry, then the fallback
registry, each pull with its own deadline. The registries here are real sockets that refuse or
never answer."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from calcgraph.workers.sandbox import SandboxBackend, SandboxError
from calcgraph.workers.sandbox.docker import DockerBackend, with_registry
from tests.sandbox.conftest import CodeFactory, _make_backend, sandbox_settings


@pytest.fixture(scope="module")
def docker_backend() -> SandboxBackend:
    found = _make_backend("docker")
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture
def silent_registry() -> Iterator[str]:
    """A registry that accepts connections and never answers (a hung mirror)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.fixture
def refusing_registry() -> str:
    """A registry address nothing listens on."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"127.0.0.1:{port}"


def test_with_registry() -> None:
    assert with_registry("calcgraph/fn:1.2.0", None) == "calcgraph/fn:1.2.0"
    assert (
        with_registry("calcgraph/fn:1.2.0", "reg.example:5000")
        == "reg.example:5000/calcgraph/fn:1.2.0"
    )
    assert with_registry("old.example/calcgraph/fn", "new.example") == "new.example/calcgraph/fn"
    assert with_registry("localhost/fn", "mirror.example/") == "mirror.example/fn"


def _backend(registry: str, fallback: str, timeout: float) -> DockerBackend:
    settings = sandbox_settings()
    return DockerBackend(
        base_url=settings.docker_host,
        base_image=settings.sandbox_base_image,
        registry=registry,
        fallback_registry=fallback,
        pull_timeout_seconds=timeout,
    )


def test_local_image_needs_no_registry(
    docker_backend: SandboxBackend, refusing_registry: str
) -> None:
    sandbox_backend = _backend(refusing_registry, refusing_registry, 1.0)
    try:
        sandbox_backend.ensure_image(
            sandbox_settings().sandbox_base_image
        )  # present: no pull at all
    finally:
        sandbox_backend.close()


def test_pull_times_out_then_falls_back(
    docker_backend: SandboxBackend, silent_registry: str, refusing_registry: str
) -> None:
    sandbox_backend = _backend(silent_registry, refusing_registry, 1.5)
    try:
        began = time.monotonic()
        with pytest.raises(SandboxError) as caught:
            sandbox_backend.ensure_image("calcgraph/fn-absent:0.0.1")
        elapsed = time.monotonic() - began
    finally:
        sandbox_backend.close()
    assert caught.value.kind == "infrastructure_error"
    message = caught.value.message
    assert f"{silent_registry}/calcgraph/fn-absent:0.0.1: no answer within 1.5 s" in message
    assert f"{refusing_registry}/calcgraph/fn-absent:0.0.1" in message  # the fallback was tried
    assert 1.5 <= elapsed < 15


def test_missing_image_fails_the_job_as_infrastructure(
    docker_backend: SandboxBackend, make_code: CodeFactory, refusing_registry: str
) -> None:
    from calcgraph.workers.sandbox import RunRequest

    sandbox_backend = _backend(refusing_registry, refusing_registry, 2.0)
    code_dir: Path = make_code(job="def main():\n    return 1\n")
    try:
        result = sandbox_backend.run(
            RunRequest(code_dir, "job:main", {}, ("v",), image="calcgraph/fn-absent:0.0.2")
        )
    finally:
        sandbox_backend.close()
    assert result.error is not None
    assert result.error.kind == "infrastructure_error"


def test_function_version_image(docker_backend: SandboxBackend, make_code: CodeFactory) -> None:
    """An image per function version: here the base image tagged as one."""
    from calcgraph.workers.sandbox import RunRequest

    assert isinstance(docker_backend, DockerBackend)
    tag = "calcgraph/fn-test-version:1.0.0"
    docker_backend.client.images.get(docker_backend.base_image).tag(tag)
    try:
        code_dir = make_code(job="import sys\ndef main():\n    return sys.version_info[0]\n")
        result = docker_backend.run(RunRequest(code_dir, "job:main", {}, ("major",), image=tag))
        assert result.outputs == {"major": 3}
    finally:
        docker_backend.client.images.remove(tag)
