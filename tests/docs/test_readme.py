"""Issue 15: the README stands alone and its shell examples run as written.

The fenced blocks marked `sh` (or `bash`, `shell`) are extracted and run in order, in one shell,
from the repository folder, after the README's own first steps: `make run` (here
`calcgraph demo`, the command it runs) and `make serve` (here `calcgraph serve` on a free port
over the same temporary SQLite database, with the development identity provider and the default
sandbox). Blocks marked `console` (make targets, production deployment) are for reading only.
The port the README names, 8000, is the only thing replaced.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SHELL = {"sh", "bash", "shell"}
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
README_PORT = "127.0.0.1:8000"


def blocks(text: str) -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in FENCE.findall(text)]


def shell_blocks() -> list[str]:
    return [body for lang, body in blocks(README.read_text()) if lang in SHELL]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_inside_the_repository(path: Path) -> None:
    text = path.read_text()
    assert "../shared" not in text
    for target in LINK.findall(text):
        if target.startswith(("http://127.0.0.1", "#")):
            continue
        assert "://" not in target, f"{path.name} links outside the repository: {target}"
        file = (path.parent / target.split("#")[0]).resolve()
        assert file.is_relative_to(ROOT), f"{path.name}: {target} leaves the repository"
        assert file.exists(), f"{path.name}: {target} does not exist"


def test_the_readme_blocks_are_marked_and_complete() -> None:
    found = blocks(README.read_text())
    langs = {lang for lang, _ in found}
    assert langs <= SHELL | {"console", "python", "json", "yaml", ""}, langs
    consoles = [body for lang, body in found if lang == "console"]
    assert any("make run" in body and "make test" in body for body in consoles)
    scripts = shell_blocks()
    assert scripts, "no runnable shell block"
    joined = "\n".join(scripts)
    assert "..." not in joined  # no placeholder in a command or a request body
    assert "make " not in joined  # make targets are `console` blocks
    # The six demo inputs with their units are listed.
    text = README.read_text()
    for name in ("span", "load", "youngs_modulus", "second_moment", "section_modulus"):
        assert f"| `{name}` |" in text
    assert "| `yield_stress` | 355 | MPa |" in text


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`make run` then `make serve`, on a temporary database and free ports."""
    tmp = tmp_path_factory.mktemp("readme")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALCGRAPH_")}
    env |= {
        "CALCGRAPH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp / 'calcgraph.db'}",
        "CALCGRAPH_DEV_IDP_PORT": str(free_port()),
        "CALCGRAPH_CREDENTIALS_FILE": str(tmp / "credentials.json"),
        "CALCGRAPH_CODE_CACHE_DIR": str(tmp / "code-cache"),
        "CALCGRAPH_BUILD_DIR": str(tmp / "builds"),
    }
    if shutil.which("bwrap") is None:
        env["CALCGRAPH_SANDBOX"] = "process"  # the default needs bubblewrap
    demo = subprocess.run(
        [sys.executable, "-m", "calcgraph", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    port = free_port()
    log = (tmp / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "calcgraph", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, (tmp / "serve.log").read_text()
            assert time.monotonic() < deadline, "calcgraph serve did not answer"
            time.sleep(0.2)
        yield {"port": str(port), "env_file": str(tmp / "env"), **env}
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_the_readme_shell_blocks_run_in_order(platform: dict[str, str]) -> None:
    port = platform["port"]
    env = {k: v for k, v in platform.items() if k not in ("port", "env_file")}
    script = ["set -euo pipefail"]
    for number, body in enumerate(shell_blocks(), 1):
        script.append(f"echo '>>> README block {number}' >&2")
        script.append(body.replace(README_PORT, f"127.0.0.1:{port}"))
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    shown = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, shown
    out = result.stdout
    assert "calcgraph " in out  # --version
    assert '"status":"ok"' in out.replace(" ", "")  # /health
    assert '"compatibility":"ALLOWED"' in out.replace(" ", "")
    assert "PASS (stiffness governs)" in out  # runs start, then runs show
    assert re.search(r"run \S+: completed", out), shown
    assert re.search(r"moment\s+\S*\s*1000", out), shown  # the lever of my-tools
    assert "HTTP Request" not in result.stderr
