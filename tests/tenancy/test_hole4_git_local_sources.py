"""Issue 12, hole 4: a Git deploy must not read the server's own disk.

`POST /packages/from-git` deploys `file://` URLs and local paths only from the folders the
operator lists in `CALCGRAPH_GIT_LOCAL_ROOTS` (none by default); a refusal is a 422 that says
nothing about what exists at the path (no branch names, same words for a missing path); a
clone runs no hooks and fetches no submodules or LFS objects.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from calcgraph.demo import package_files
from calcgraph.settings import Settings
from calcgraph.sources.git import fetch_repository
from tests.packages.publishing import Bearer

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is not installed",
)

SECRET_BRANCH = "ops-secret-rotation"


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def demo_repository(path: Path) -> Path:
    """The demo package tagged v1.2.0, with a branch whose name must never leak."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, source in package_files().items():
        (path / name).write_text(source)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "demo")
    git(path, "tag", "v1.2.0")
    git(path, "branch", SECRET_BRANCH)
    return path


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    allowed = tmp_path / "allowed"
    server = tmp_path / "server-disk"
    inside = demo_repository(allowed / "demo")
    outside = demo_repository(server / "demo")
    (allowed / "link").symlink_to(outside)
    return {"allowed": allowed, "inside": inside, "outside": outside}


async def deploy(
    client: httpx.AsyncClient, headers: dict[str, str], url: str, ref: str = "v1.2.0"
) -> httpx.Response:
    body = {"git_url": url, "ref": ref}
    return await client.post("/packages/from-git", json=body, headers=headers)


def refused(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    body: dict[str, Any] = response.json()
    assert body["detail"].startswith("ValidationError: ")
    assert body["errors"][0]["loc"][-1] == "git_url"
    text = response.text
    for name in (SECRET_BRANCH, "main", "v1.2.0"):
        assert name not in text
    return body


async def test_without_local_roots_no_local_source_is_deployed(
    client: httpx.AsyncClient, bearer: Bearer, layout: dict[str, Path], tmp_path: Path
) -> None:
    alice = bearer("alice")
    repo = layout["inside"]
    by_url = refused(await deploy(client, alice, repo.as_uri()))
    by_path = refused(await deploy(client, alice, str(repo)))
    by_localhost = refused(await deploy(client, alice, f"file://localhost{repo}"))
    missing = refused(await deploy(client, alice, (tmp_path / "no-such-dir").as_uri()))
    # The same words whether the path holds a repository or nothing.
    assert by_url == by_path == by_localhost == missing
    assert "CALCGRAPH_GIT_LOCAL_ROOTS" not in by_url["detail"] + str(by_url["errors"])
    # An unknown ref of a server repository used to answer 404 with its branch names.
    refused(await deploy(client, alice, repo.as_uri(), ref="no-such-ref"))
    listing = await client.get("/packages", headers=alice)
    assert listing.json()["items"] == []


@pytest.fixture
def rooted(settings: Settings, layout: dict[str, Path]) -> Settings:
    return settings.model_copy(update={"git_local_roots": [layout["allowed"]]})


@pytest.fixture
def rooted_client(rooted: Settings, database: Any) -> Any:
    from calcgraph.app import create_app

    transport = httpx.ASGITransport(app=create_app(rooted, database))
    return httpx.AsyncClient(transport=transport, base_url="http://calcgraph.test")


async def test_local_roots_admit_only_what_resolves_inside_them(
    rooted_client: httpx.AsyncClient, bearer: Bearer, layout: dict[str, Path]
) -> None:
    alice = bearer("alice")
    allowed, outside = layout["allowed"], layout["outside"]
    async with rooted_client as client:
        escapes = [
            outside.as_uri(),
            str(outside),
            f"{allowed}/../server-disk/demo",
            (allowed / "link").as_uri(),  # a symlink inside the root to a folder outside
            "file://" + str(allowed / "%2e%2e" / "server-disk" / "demo"),
        ]
        answers = [refused(await deploy(client, alice, url)) for url in escapes]
        assert all(answer == answers[0] for answer in answers)
        # Outside the roots, a missing path and a repository read the same.
        assert answers[0] == refused(await deploy(client, alice, "/nonexistent/repo"))

        created = await deploy(client, alice, layout["inside"].as_uri())
        assert created.status_code == 201, created.text
        assert created.json()["package_version"] == "1.2.0"
        # Inside the roots the repository is the operator's to offer: its refs may be named.
        unknown = await deploy(client, alice, str(layout["inside"]), ref="no-such-ref")
        assert unknown.status_code == 404, unknown.text


def test_roots_come_comma_separated_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CALCGRAPH_GIT_LOCAL_ROOTS", "/srv/git, /opt/repos")
    assert Settings(_env_file=None).git_local_roots == [Path("/srv/git"), Path("/opt/repos")]  # type: ignore[call-arg]
    monkeypatch.delenv("CALCGRAPH_GIT_LOCAL_ROOTS")
    assert Settings(_env_file=None).git_local_roots == []  # type: ignore[call-arg]
    monkeypatch.setenv("CALCGRAPH_GIT_LOCAL_ROOTS", "relative/dir")
    with pytest.raises(ValueError, match="CALCGRAPH_GIT_LOCAL_ROOTS"):
        Settings(_env_file=None)  # type: ignore[call-arg]


async def test_a_clone_runs_no_hooks_submodules_or_lfs(tmp_path: Path) -> None:
    root = tmp_path / "root"
    marker = tmp_path / "hook-ran"
    sub = demo_repository(root / "sub")
    repo = demo_repository(root / "main")
    git(
        repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub.as_uri(), "vendored"
    )
    (repo / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    (repo / "data.bin").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 3\n"
    )
    hook = f"#!/bin/sh\ntouch {marker}\n"
    for name in ("post-checkout", "post-merge", "reference-transaction", "pre-upload-pack"):
        (repo / ".git" / "hooks" / name).write_text(hook)
        os.chmod(repo / ".git" / "hooks" / name, 0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "submodule and lfs")
    git(repo, "tag", "v2")
    marker.unlink(missing_ok=True)

    checkout = await fetch_repository(
        repo.as_uri(),
        "v2",
        tmp_path / "checkout",
        timeout_seconds=60,
        max_bytes=50 * 1024 * 1024,
        local_roots=[root],
    )
    assert not marker.exists()
    assert not any(path.startswith("vendored/") for path in checkout.files)
    assert checkout.files["data.bin"].startswith(b"version https://git-lfs")
    assert not (tmp_path / "checkout" / ".git" / "modules").exists()
