"""The git adapter against real repositories that the tests create with the git CLI."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from calcgraph.domain.errors import InvalidRequest, NotFound, ValidationError
from calcgraph.sources.git import GitCheckout, fetch_repository
from calcgraph.sources.git_checks import check_git_url, check_ref

pytestmark = pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is not installed",
)

LIMIT = 50 * 1024 * 1024


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, content in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def manifest(version: str) -> str:
    return f"kind: package\nversion: 1\npackage: {{name: demo, version: {version}}}\n"


@dataclass
class Repo:
    path: Path
    first: str
    untagged: str
    rc: str
    release: str
    feature: str

    @property
    def url(self) -> str:
        return self.path.as_uri()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    path = tmp_path_factory.mktemp("origin") / "demo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    first = commit(path, {"calcgraph.yaml": manifest("1.0.0"), "beam.py": "x = 1\n"}, "first")
    git(path, "tag", "-a", "v1.0.0", "-m", "release 1.0.0")
    untagged = commit(path, {"beam.py": "x = 2\n"}, "untagged work")
    os.symlink("/etc/hostname", path / "link.py")
    rc = commit(path, {"calcgraph.yaml": manifest("1.1.0-rc.1")}, "rc")
    git(path, "tag", "v1.1.0-rc.1")
    git(path, "checkout", "-q", "-b", "feature")
    feature = commit(path, {"feature.py": "y = 1\n"}, "feature work")
    git(path, "checkout", "-q", "main")
    release = commit(path, {"calcgraph.yaml": manifest("1.1.0")}, "release")
    git(path, "tag", "v1.1.0")
    return Repo(path, first, untagged, rc, release, feature)


async def fetch(repo: Repo, ref: str, dest: Path, **limits: float) -> GitCheckout:
    return await fetch_repository(
        repo.url,
        ref,
        dest,
        timeout_seconds=limits.get("timeout_seconds", 60),
        max_bytes=int(limits.get("max_bytes", LIMIT)),
        local_roots=[repo.path.parent],
    )


class TestResolve:
    async def test_annotated_tag(self, repo: Repo, tmp_path: Path) -> None:
        checkout = await fetch(repo, "v1.0.0", tmp_path / "c")
        assert (checkout.ref_kind, checkout.commit) == ("tag", repo.first)
        assert checkout.files["calcgraph.yaml"] == manifest("1.0.0").encode()
        assert checkout.files["beam.py"] == b"x = 1\n"
        assert ".git/HEAD" not in checkout.files

    async def test_pre_release_tag(self, repo: Repo, tmp_path: Path) -> None:
        checkout = await fetch(repo, "v1.1.0-rc.1", tmp_path / "c")
        assert (checkout.ref_kind, checkout.commit) == ("tag", repo.rc)
        assert b"1.1.0-rc.1" in checkout.files["calcgraph.yaml"]

    async def test_branches(self, repo: Repo, tmp_path: Path) -> None:
        main = await fetch(repo, "main", tmp_path / "main")
        assert (main.ref_kind, main.commit) == ("branch", repo.release)
        feature = await fetch(repo, "refs/heads/feature", tmp_path / "feature")
        assert (feature.ref_kind, feature.commit) == ("branch", repo.feature)
        assert "feature.py" in feature.files
        assert "feature.py" not in main.files

    async def test_full_sha_of_a_commit_no_ref_points_at(self, repo: Repo, tmp_path: Path) -> None:
        checkout = await fetch(repo, repo.untagged, tmp_path / "c")
        assert (checkout.ref_kind, checkout.commit) == ("commit", repo.untagged)
        assert checkout.files["beam.py"] == b"x = 2\n"
        assert (tmp_path / "c" / ".git" / "shallow").exists()

    async def test_short_sha(self, repo: Repo, tmp_path: Path) -> None:
        inner = await fetch(repo, repo.untagged[:8], tmp_path / "inner")
        assert (inner.ref_kind, inner.commit) == ("commit", repo.untagged)
        tip = await fetch(repo, repo.feature[:7].upper(), tmp_path / "tip")
        assert tip.commit == repo.feature

    async def test_a_local_path_works_like_a_file_url(self, repo: Repo, tmp_path: Path) -> None:
        checkout = await fetch_repository(
            str(repo.path),
            "v1.1.0",
            tmp_path / "c",
            timeout_seconds=60,
            max_bytes=LIMIT,
            local_roots=[repo.path.parent],
        )
        assert checkout.commit == repo.release

    async def test_symlinks_are_plain_files_and_no_hooks_are_installed(
        self, repo: Repo, tmp_path: Path
    ) -> None:
        checkout = await fetch(repo, "v1.1.0", tmp_path / "c")
        assert checkout.files["link.py"] == b"/etc/hostname"
        assert not (tmp_path / "c" / "link.py").is_symlink()
        assert not (tmp_path / "c" / ".git" / "hooks").exists()

    async def test_unknown_ref_names_the_tags_and_branches(
        self, repo: Repo, tmp_path: Path
    ) -> None:
        for ref in ("v9.9.9", "deadbeef"):
            with pytest.raises(NotFound) as caught:
                await fetch(repo, ref, tmp_path / ref)
            assert "tags: v1.0.0, v1.1.0, v1.1.0-rc.1" in caught.value.message
            assert "branches: feature, main" in caught.value.message


class TestRefusals:
    @pytest.mark.parametrize(
        "url",
        [
            "ext::sh -c touch% /tmp/pwned",
            "ext::sh",
            "-uhelp",
            "--upload-pack=touch /tmp/x",
            "ssh://host/repo.git",
            "git@github.com:org/repo.git",
            "http://example.com/repo.git",
            "relative/path",
            "file://otherhost/repo",
            "https://",
            "https://example.com/a b",
            "",
        ],
    )
    def test_bad_urls(self, url: str) -> None:
        with pytest.raises(ValidationError) as caught:
            check_git_url(url)
        assert caught.value.errors[0].loc == ("git_url",)

    def test_local_sources_need_a_local_root(self, repo: Repo) -> None:
        with pytest.raises(ValidationError, match="git_url"):
            check_git_url(repo.url)
        with pytest.raises(ValidationError):
            check_git_url(str(repo.path))
        assert check_git_url(repo.url, local_roots=[repo.path.parent]) == repo.url
        assert check_git_url("https://example.com/org/repo.git", ["https"])

    @pytest.mark.parametrize(
        "ref", ["", "-x", "--upload-pack=x", "a..b", "a b", "a:b", "x^{}", "b.lock"]
    )
    def test_bad_refs(self, ref: str) -> None:
        with pytest.raises(ValidationError) as caught:
            check_ref(ref)
        assert caught.value.errors[0].loc == ("ref",)

    async def test_missing_repository(self, tmp_path: Path) -> None:
        with pytest.raises(InvalidRequest, match="ls-remote"):
            await fetch_repository(
                (tmp_path / "nothing").as_uri(),
                "main",
                tmp_path / "c",
                timeout_seconds=30,
                max_bytes=LIMIT,
                local_roots=[tmp_path],
            )

    async def test_destination_must_be_empty(self, repo: Repo, tmp_path: Path) -> None:
        (tmp_path / "c").mkdir()
        (tmp_path / "c" / "x").write_text("x")
        with pytest.raises(InvalidRequest, match="not empty"):
            await fetch(repo, "main", tmp_path / "c")


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    path = tmp_path_factory.mktemp("big") / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "data.bin").write_bytes(os.urandom(2 * 1024 * 1024))
    sha = commit(path, {"calcgraph.yaml": manifest("1.0.0")}, "big")
    git(path, "tag", "v1.0.0")
    return Repo(path, sha, sha, sha, sha, sha)


class TestLimits:
    async def test_size_limit(self, big: Repo, tmp_path: Path) -> None:
        with pytest.raises(InvalidRequest, match="larger than the limit of 1000000 bytes"):
            await fetch(big, "v1.0.0", tmp_path / "c", max_bytes=1_000_000)
        checkout = await fetch(big, "v1.0.0", tmp_path / "ok", max_bytes=10_000_000)
        assert len(checkout.files["data.bin"]) == 2 * 1024 * 1024

    async def test_timeout(self, big: Repo, tmp_path: Path) -> None:
        with pytest.raises(InvalidRequest, match="took longer than 0.001 s"):
            await fetch(big, "v1.0.0", tmp_path / "c", timeout_seconds=0.001)
