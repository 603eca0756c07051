"""POST /packages/from-git against real repositories the tests create with the git CLI
(file URLs): tags, branches, full and short commit SHAs; `git_ref` and `git_commit` kept."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from calcgraph.demo import package_files
from calcgraph.settings import Settings
from tests.packages.publishing import Bearer, by_name

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is not installed",
)


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def demo_tree(version: str, deflection_limit: str = "125.0") -> dict[str, str]:
    files = package_files()
    manifest = yaml.safe_load(files["calcgraph.yaml"])
    manifest["package"]["version"] = version
    files["calcgraph.yaml"] = yaml.safe_dump(manifest, sort_keys=False)
    files["checks.py"] = files["checks.py"].replace("125.0", deflection_limit)
    files["README.md"] = f"demo {version}\n"
    return files


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, content in files.items():
        (repo / name).write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@dataclass(frozen=True)
class Repo:
    path: Path
    v120: str
    v130: str
    feature: str
    untagged: str

    @property
    def url(self) -> str:
        return self.path.as_uri()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    path = tmp_path_factory.mktemp("demo-repo")
    git(path, "init", "-q", "-b", "main")
    v120 = commit(path, demo_tree("1.2.0"), "1.2.0")
    git(path, "tag", "v1.2.0")
    v130 = commit(path, demo_tree("1.3.0", "150.0"), "1.3.0")
    git(path, "tag", "-a", "v1.3.0", "-m", "release 1.3.0")  # annotated: peeled to the commit
    git(path, "tag", "v9.9.9")  # a tag whose version disagrees with the manifest
    git(path, "checkout", "-q", "-b", "feature")
    feature = commit(path, demo_tree("1.4.0-beta.1", "175.0"), "beta")
    git(path, "checkout", "-q", "main")
    untagged = commit(path, demo_tree("1.3.1", "160.0"), "1.3.1")
    return Repo(path, v120, v130, feature, untagged)


@pytest.fixture
def settings(settings: Settings, repo: Repo) -> Settings:
    """The operator allows local deploys from the folder holding the test repository."""
    return settings.model_copy(update={"git_local_roots": [repo.path.parent]})


async def deploy(
    client: httpx.AsyncClient, headers: dict[str, str], repo: Repo, ref: str, status: int = 201
) -> dict[str, Any]:
    response = await client.post(
        "/packages/from-git", json={"git_url": repo.url, "ref": ref}, headers=headers
    )
    assert response.status_code == status, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_tags_deploy_versions_side_by_side(
    client: httpx.AsyncClient, bearer: Bearer, repo: Repo
) -> None:
    alice = bearer("alice")
    first = await deploy(client, alice, repo, "v1.2.0")
    assert first["package_version"] == "1.2.0"
    assert first["git_ref"] == "v1.2.0"
    assert first["git_commit"] == repo.v120
    assert len(first["git_commit"]) == 40
    second = await deploy(client, alice, repo, "v1.3.0")
    assert second["git_commit"] == repo.v130
    assert by_name(second)["cantilever"]["status"] == "unchanged"
    assert by_name(second)["verdict"] == {
        **by_name(second)["verdict"],
        "status": "updated",
        "version": "1.2.1",
    }
    listing = (await client.get("/packages/demo-beam/versions", headers=alice)).json()
    assert [(v["version"], v["git_ref"], v["git_commit"]) for v in listing["versions"]] == [
        ("1.2.0", "v1.2.0", repo.v120),
        ("1.3.0", "v1.3.0", repo.v130),
    ]
    # Both stay addressable.
    old = await client.get("/functions/verdict/versions?package=demo-beam", headers=alice)
    assert [v["package_version"] for v in old.json()["versions"]] == ["1.2.0", "1.3.0"]


async def test_branch_and_commits(client: httpx.AsyncClient, bearer: Bearer, repo: Repo) -> None:
    alice = bearer("alice")
    beta = await deploy(client, alice, repo, "feature")
    assert (beta["package_version"], beta["git_ref"], beta["git_commit"]) == (
        "1.4.0-beta.1",
        "feature",
        repo.feature,
    )
    assert beta["is_stable"] is False
    full = await deploy(client, alice, repo, repo.v120)
    assert (full["package_version"], full["git_commit"]) == ("1.2.0", repo.v120)
    short = await deploy(client, alice, repo, repo.untagged[:10])
    assert (short["package_version"], short["git_ref"]) == ("1.3.1", repo.untagged[:10])
    assert short["git_commit"] == repo.untagged
    assert short["is_latest"] is True


async def test_refusals(
    client: httpx.AsyncClient, bearer: Bearer, repo: Repo, tmp_path: Path
) -> None:
    alice = bearer("alice")
    mismatch = await deploy(client, alice, repo, "v9.9.9", status=422)
    assert "9.9.9" in mismatch["detail"]
    assert mismatch["detail"].startswith("ValidationError: ")
    missing = await deploy(client, alice, repo, "no-such-branch", status=404)
    assert "v1.2.0" in missing["detail"]  # names the refs that exist

    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q", "-b", "main")
    commit(empty, {"README.md": "nothing\n"}, "no manifest")
    response = await client.post(
        "/packages/from-git",
        json={"git_url": empty.as_uri(), "ref": "main"},
        headers=alice,
    )
    assert response.status_code == 422
    assert "calcgraph.yaml" in response.json()["detail"]
    bad_url = await client.post(
        "/packages/from-git", json={"git_url": "ext::sh -c x", "ref": "main"}, headers=alice
    )
    assert bad_url.status_code == 422
    # Nothing was written by the refusals.
    listing = await client.get("/packages/demo-beam/versions", headers=alice)
    assert listing.status_code == 404
