"""Issue 29: the wheel a Python user builds carries the web app and the licence.

A clean copy of the tracked tree (`git archive` of the working tree's tracked files, no
node_modules, no built app) is built with `pip wheel` as a user would, the wheel installed into
a fresh virtual environment, and its `calcgraph serve` answers `/ui/` and GraphiQL. The build
runs the pinned Node of make's .venv (on PATH as make puts it); npm's and pip's caches are
reused, and the checkout's web/node_modules when it is what `npm ci` installed from the current
lock file (hard links: the build reads them, `npm ci` would only write the same files again).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOT_TRACKED = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "dist", "gql", "__pycache__", "*.egg-info", ".*_cache"
)


def _clean_copy(dest: Path) -> None:
    """The tracked files as they are now: `git stash create` makes a commit of the working
    tree's tracked changes without touching anything (nothing changed: HEAD)."""
    try:
        commit = (
            subprocess.run(
                ["git", "-C", str(ROOT), "stash", "create"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            or "HEAD"
        )
    except (OSError, subprocess.CalledProcessError):
        # Not a git checkout (a `git archive` copy, as the bare-Debian script makes).
        shutil.copytree(ROOT, dest, ignore=NOT_TRACKED)
        return
    archive = dest.parent / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", commit], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="tar")
    archive.unlink()


def _reuse_node_modules(copy: Path) -> None:
    installed = ROOT / "web" / "node_modules"
    done = installed / ".package-lock.json"
    lock = ROOT / "web" / "package-lock.json"
    if not done.is_file() or done.stat().st_mtime < lock.stat().st_mtime:
        return  # `npm ci` runs in the copy (from npm's cache when it can)
    result = subprocess.run(["cp", "-al", str(installed), str(copy / "web")], check=False)
    if result.returncode != 0:
        shutil.rmtree(copy / "web" / "node_modules", ignore_errors=True)
        return
    # The copy's record of what npm installed is its own file, newer than the copy's lock.
    copied = copy / "web" / "node_modules" / ".package-lock.json"
    copied.unlink()
    shutil.copyfile(done, copied)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    copy = work / "calcgraph"
    _clean_copy(copy)
    assert not (copy / "calcgraph" / "webui" / "dist").exists()
    _reuse_node_modules(copy)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALCGRAPH_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "out"), "."],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "Warning" not in built.stderr, built.stderr  # setuptools' deprecations, among others
    (found,) = (work / "out").glob("calcgraph-*.whl")
    return found


def test_the_wheel_carries_the_web_app_and_the_licence(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        meta = archive.read(metadata).decode()
        (licence,) = (n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
        assert archive.read(licence).decode() == (ROOT / "LICENSE").read_text()
    assert {"calcgraph/webui/dist/index.html", "calcgraph/webui/dist/graphiql.html"} <= names
    assert any(n.startswith("calcgraph/webui/dist/assets/") and n.endswith(".js") for n in names)
    assert not any("node_modules" in n or n.startswith("web/") for n in names)
    assert "License-Expression: Apache-2.0" in meta
    assert "Classifier: License ::" not in meta


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def served(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The wheel in a fresh virtual environment, `calcgraph serve` started from outside the
    checkout (nothing of it is importable there)."""
    home = tmp_path_factory.mktemp("installed")
    venv = home / "venv"
    # No pip of its own (this pip installs into it) and no byte-compiling: what the wheel
    # carries and serves is the same, at a fraction of the time.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300
    )
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
        + ["-q", "--no-compile", str(wheel)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CALCGRAPH_", "PYTHON"))}
    env |= {
        "CALCGRAPH_DATABASE_URL": f"sqlite+aiosqlite:///{home / 'calcgraph.db'}",
        "CALCGRAPH_DEV_IDP_PORT": str(_free_port()),
        "CALCGRAPH_CREDENTIALS_FILE": str(home / "credentials.json"),
        "CALCGRAPH_CODE_CACHE_DIR": str(home / "code-cache"),
        "CALCGRAPH_BUILD_DIR": str(home / "builds"),
    }
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import calcgraph; print(calcgraph.__file__)"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(where.strip()).is_relative_to(venv), where
    port = _free_port()
    with (home / "serve.log").open("w") as log:
        server = subprocess.Popen(
            [str(venv / "bin" / "calcgraph"), "serve", "--port", str(port)],
            cwd=home,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert server.poll() is None, (home / "serve.log").read_text()
                assert time.monotonic() < deadline, "calcgraph serve did not answer"
                time.sleep(0.2)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()


def test_the_installed_wheel_serves_the_app_and_graphiql(served: str) -> None:
    # Generous timeouts: the first requests import and compile what they use (no byte-compiling
    # at install), on a machine that may be busy; no speed is asserted here.
    app = httpx.get(f"{served}/ui/", timeout=120)
    assert app.status_code == 200, app.text
    script = re.search(r'<script[^>]* src="(/ui/assets/[^"]+\.js)"', app.text)
    assert script is not None, app.text
    assert httpx.get(f"{served}{script.group(1)}", timeout=120).status_code == 200
    graphiql = httpx.get(f"{served}/graphql", headers={"Accept": "text/html"}, timeout=120)
    assert graphiql.status_code == 200, graphiql.text
    assert "<script" in graphiql.text
