"""Hole 1, "no weak sandbox by default": with bubblewrap missing, `make run` and `calcgraph
serve` ran every job in the `process` backend, where a job reached the API, Redis and PostgreSQL
on loopback, read other users' code from the worker's code cache (0755/0644) and the SQLite file
(0644), and wrote to /var/tmp and /dev/shm.

Now the default is bwrap, a backend that cannot enforce the limits refuses to start naming the
fix, `process` runs only when named and says it is for a single trusted user, and even there the
code cache, staging and database file are private and (as root) the job has a network namespace
and mount namespace of its own.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from calcgraph.db.engine import Database
from calcgraph.settings import Settings
from calcgraph.workers.code_cache import CodeCache, tree_key
from calcgraph.workers.sandbox import (
    Limits,
    RunRequest,
    SandboxBackend,
    SandboxUnavailable,
    create_backend,
)
from tests.sandbox.conftest import CodeFactory, Runner, contained, skip_unless_process_backend

CALCGRAPH = str(Path(sys.executable).with_name("calcgraph"))


def _needs_root_for_namespaces(backend: SandboxBackend) -> None:
    if backend.name == "process" and os.geteuid() != 0:
        pytest.skip("the process backend gets namespaces (and a uid of its own) only as root")


# --- the default and the refusal ------------------------------------------------------------


@pytest.fixture
def no_bwrap(tmp_path: Path) -> dict[str, str]:
    """An environment in which bubblewrap is not installed (PATH without it)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALCGRAPH_")}
    env.update(
        PATH=str(empty),
        CALCGRAPH_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'cg.db'}",
        CALCGRAPH_DEV_IDP_PORT=str(_free_port()),
    )
    return env


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_default_is_bwrap_even_without_bubblewrap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CALCGRAPH_SANDBOX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.sandbox_kind == "bwrap"
    from calcgraph.workers.sandbox import preflight

    with pytest.raises(SandboxUnavailable, match=r"apt-get install bubblewrap"):
        preflight(settings)


@pytest.mark.parametrize(
    "command",
    [
        ["demo", "--fresh"],
        ["serve", "--port", "0"],
        ["worker", "--processes", "2"],
    ],
    ids=["demo", "serve", "worker"],
)
def test_commands_refuse_to_start_without_bubblewrap(
    no_bwrap: dict[str, str], command: list[str]
) -> None:
    env = dict(no_bwrap)
    if command[0] == "worker":
        env["CALCGRAPH_REDIS_URL"] = "redis://127.0.0.1:6379/0"
        env["CALCGRAPH_REDIS_KEY_PREFIX"] = f"hole1-{uuid.uuid4().hex[:8]}:"
    try:
        done = subprocess.run(
            [CALCGRAPH, *command], env=env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`calcgraph {command[0]}` started without bubblewrap instead of refusing")
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "refusing to start" in done.stderr
    assert "CALCGRAPH_SANDBOX=bwrap" in done.stderr
    assert "apt-get install bubblewrap" in done.stderr


def test_docker_without_engine_refuses_naming_the_fix(no_bwrap: dict[str, str]) -> None:
    env = dict(no_bwrap, CALCGRAPH_SANDBOX="docker", CALCGRAPH_DOCKER_HOST="unix:///nonexistent")
    done = subprocess.run(
        [CALCGRAPH, "demo", "--fresh"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "start Docker" in done.stderr


def test_process_says_it_is_for_a_single_trusted_user(caplog: pytest.LogCaptureFixture) -> None:
    skip_unless_process_backend()
    settings = Settings(_env_file=None, sandbox="process")  # type: ignore[call-arg]
    for _ in range(2):  # at every start
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            create_backend(settings).enforcement()
        assert any("SINGLE TRUSTED USER" in r.getMessage() for r in caplog.records)


# --- private files --------------------------------------------------------------------------


def _modes(root: Path) -> list[tuple[str, int]]:
    found = [(str(root), stat.S_IMODE(root.stat().st_mode))]
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            found.append((str(path), stat.S_IMODE(path.stat().st_mode)))
    return found


@pytest.fixture
def other_function_code() -> Iterator[Path]:
    """Another user's function in a code cache where the worker keeps it by default (under the
    shared temp directory), created afresh."""
    root = Path(tempfile.gettempdir()) / f"calcgraph-code-test-{uuid.uuid4().hex[:12]}"
    cache = CodeCache(root)
    secret = f"SECRET = 'other-user-{uuid.uuid4().hex}'\n".encode()
    digest = hashlib.sha256(secret).hexdigest()
    files = {"secret.py": digest}
    code_dir = cache.stage(files, lambda _: {digest: secret})
    assert code_dir.name == tree_key(files)
    yield code_dir / "secret.py"
    shutil.rmtree(root, ignore_errors=True)


def test_code_cache_is_private(other_function_code: Path) -> None:
    root = other_function_code.parent.parent
    for path, mode in _modes(root):
        if os.path.isdir(path):
            assert mode == 0o700, (path, oct(mode))
        else:
            assert mode == 0o600, (path, oct(mode))


def test_job_cannot_read_another_functions_code(
    sandbox_backend: SandboxBackend, run: Runner, other_function_code: Path
) -> None:
    if sandbox_backend.name == "process" and os.geteuid() != 0:
        pytest.skip("the process backend as a non-root user runs jobs as the worker's own uid")
    source = """
    import os
    def main(path):
        out = {}
        for target in (path, os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
            try:
                if os.path.isdir(target):
                    out[target] = os.listdir(target)
                else:
                    out[target] = open(target).read()
            except OSError as exc:
                out[target] = "blocked: " + type(exc).__name__
        return {"found": out}
    """
    found = contained(run(source, {"path": str(other_function_code)}))["found"]
    assert isinstance(found, dict)
    assert all(str(v).startswith("blocked: ") for v in found.values()), found


def test_staged_code_is_private(
    sandbox_backend: SandboxBackend, make_code: CodeFactory, limits: Limits
) -> None:
    if sandbox_backend.name == "bwrap":
        pytest.skip("bwrap mounts the private code cache itself: nothing is staged")
    code_dir = make_code(job="def main():\n    return {'ok': 1}\n")
    sandbox = sandbox_backend.start(RunRequest(code_dir, "job:main", {}, (), limits).spec)
    try:
        staged = Path(sandbox.details["code_dir"]).parent  # type: ignore[attr-defined]
        for path, mode in _modes(staged):
            assert mode & 0o007 == 0, (path, oct(mode))  # nothing for other users
    finally:
        sandbox.close()


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_sqlite_file_is_private(tmp_path: Path, backend: str) -> None:
    """Only SQLite has a file (PostgreSQL keeps its own): created 0600, -wal and -shm alike, and
    an older 0644 file is brought to 0600."""
    path = tmp_path / "calcgraph.db"
    database = Database(f"sqlite+aiosqlite:///{path}")
    try:
        async with database.write_session() as session:
            await session.execute(text("CREATE TABLE t (x TEXT)"))
            await session.execute(text("INSERT INTO t VALUES ('secret')"))
        companions = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
        assert all(p.exists() for p in companions)
        for companion in companions:
            assert stat.S_IMODE(companion.stat().st_mode) == 0o600, companion
    finally:
        await database.dispose()
    path.chmod(0o644)
    again = Database(f"sqlite+aiosqlite:///{path}")
    await again.dispose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# --- network and shared folders -------------------------------------------------------------

REACH = """
import socket
def main(targets):
    reached = {}
    for host, port in targets:
        try:
            socket.create_connection((host, port), timeout=2).close()
            reached[f"{host}:{port}"] = "REACHED"
        except OSError as exc:
            reached[f"{host}:{port}"] = type(exc).__name__
    return {"reached": reached}
"""


@pytest.fixture
def api_listener() -> Iterator[int]:
    """A stand-in for the API on the worker's loopback."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield int(server.getsockname()[1])
    server.close()


def test_job_cannot_reach_loopback_services(
    sandbox_backend: SandboxBackend, run: Runner, api_listener: int
) -> None:
    _needs_root_for_namespaces(sandbox_backend)
    targets = [
        ["127.0.0.1", api_listener],
        ["127.0.0.1", 6379],  # Redis
        ["127.0.0.1", 5432],  # PostgreSQL
        ["127.0.0.1", 8000],  # the API's default port
        ["localhost", 5432],
        ["127.0.1.1", 6379],
    ]
    reached = contained(run(REACH, {"targets": targets}))["reached"]
    assert isinstance(reached, dict)
    assert "REACHED" not in reached.values(), reached


@pytest.mark.parametrize("folder", ["/var/tmp", "/dev/shm"])
def test_job_cannot_write_shared_host_folders(
    sandbox_backend: SandboxBackend, run: Runner, folder: str
) -> None:
    _needs_root_for_namespaces(sandbox_backend)
    name = f"calcgraph-hole1-{uuid.uuid4().hex}"
    source = """
    def main(path):
        try:
            with open(path, "w") as handle:
                handle.write("escaped")
            return {"wrote": True}
        except OSError as exc:
            return {"wrote": False, "error": repr(exc)}
    """
    outputs = contained(run(source, {"path": f"{folder}/{name}"}))
    assert not os.path.exists(f"{folder}/{name}")
    assert outputs["wrote"] is False or sandbox_backend.name != "process", outputs
