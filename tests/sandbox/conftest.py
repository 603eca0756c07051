"""Sandbox fixtures: every backend this machine has, each a real sandbox (no doubles).

`CALCGRAPH_TEST_SANDBOXES` (comma-separated, default `process,bwrap,docker`) selects backends. A
backend that cannot run here skips its tests with the reason; the docker ones need an engine at
`CALCGRAPH_DOCKER_HOST` and the image `CALCGRAPH_SANDBOX_BASE_IMAGE` (`scripts/ensure-sandboxes.sh`
provides both on a Debian machine where it runs as root).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from calcgraph.settings import Settings
from calcgraph.workers.sandbox import (
    Limits,
    RunRequest,
    RunResult,
    SandboxBackend,
    SandboxUnavailable,
    create_backend,
)

ALL_BACKENDS = ("process", "bwrap", "docker")
SELECTED = [
    b.strip()
    for b in os.environ.get("CALCGRAPH_TEST_SANDBOXES", ",".join(ALL_BACKENDS)).split(",")
    if b.strip()
]
# Short enough for the suite, long enough for a cold docker start on a busy 2-core machine.
TEST_TIMEOUT = 20.0

_backends: dict[str, SandboxBackend | str] = {}


def sandbox_settings() -> Settings:
    return Settings(_env_file=None)  # type: ignore[call-arg]


def _make_backend(name: str) -> SandboxBackend | str:
    """The backend, or why it cannot run on this machine."""
    if name not in _backends:
        settings = sandbox_settings()
        try:
            sandbox_backend = create_backend(settings, kind=name)  # type: ignore[arg-type]
            sandbox_backend.enforcement()
            if name == "docker":
                from docker.errors import ImageNotFound

                try:
                    sandbox_backend.client.images.get(settings.sandbox_base_image)  # type: ignore[attr-defined]
                except ImageNotFound:
                    raise SandboxUnavailable(
                        f"the image {settings.sandbox_base_image} is missing"
                    ) from None
            _backends[name] = sandbox_backend
        except SandboxUnavailable as exc:
            _backends[name] = (
                f"{name} sandbox unavailable here: {exc} "
                "(run `sudo bash scripts/ensure-sandboxes.sh`, see README, Sandboxes)"
            )
    return _backends[name]


def skip_unless_process_backend() -> None:
    """Skip a test of the process backend itself where it refuses to start (root in a
    container without CAP_SYS_ADMIN: no namespaces to confine jobs with), saying why."""
    found = _make_backend("process")
    if isinstance(found, str):
        pytest.skip(found)


@pytest.fixture(scope="session", params=SELECTED)
def sandbox_backend(request: pytest.FixtureRequest) -> SandboxBackend:
    found = _make_backend(str(request.param))
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="session", autouse=True)
def _close_backends() -> Iterator[None]:
    yield
    for found in _backends.values():
        if not isinstance(found, str):
            found.close()


CodeFactory = Callable[..., Path]


@pytest.fixture
def make_code(tmp_path: Path) -> CodeFactory:
    """Write a code directory with modules given as `name=source` (dedented)."""
    counter = iter(range(1000))

    def make(**modules: str) -> Path:
        code_dir = tmp_path / f"code{next(counter)}"
        code_dir.mkdir()
        for module, source in modules.items():
            (code_dir / f"{module}.py").write_text(textwrap.dedent(source))
        return code_dir

    return make


@pytest.fixture
def limits() -> Limits:
    return Limits(timeout_seconds=TEST_TIMEOUT)


Runner = Callable[..., RunResult]


@pytest.fixture
def run(sandbox_backend: SandboxBackend, make_code: CodeFactory, limits: Limits) -> Runner:
    """Run `main(**inputs)` of a one-module package `source` cold on the sandbox_backend."""

    def run_source(
        source: str,
        inputs: dict[str, object] | None = None,
        ports: tuple[str, ...] = (),
        limits_: Limits | None = None,
        handler: str = "job:main",
    ) -> RunResult:
        code_dir = make_code(job=source)
        request = RunRequest(code_dir, handler, inputs or {}, ports, limits_ or limits)
        return sandbox_backend.run(request)

    return run_source


def require(sandbox_backend: SandboxBackend, limit: str) -> None:
    if limit in sandbox_backend.unenforceable:
        pytest.skip(f"the {sandbox_backend.name} backend documents {limit} as unenforceable")


def contained(result: object) -> dict[str, object]:
    """The outputs of an attempt that ran to completion (its own checks are in the outputs)."""
    assert getattr(result, "status", None) == "success", result
    outputs = getattr(result, "outputs", None)
    assert isinstance(outputs, dict)
    return outputs
