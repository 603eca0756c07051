"""Fetch a package's source from a git repository at a tag, branch or commit (git CLI).

The git CLI runs as an asyncio subprocess, so nothing blocks the event loop, and a clone
that runs over its time or size limit is killed with its whole process group (transport
helpers included). Hardening, because the URL and the repository come from users:

- only `https://` URLs, and `file://` URLs or absolute paths that resolve (symlinks and `..`
  followed) inside one of the operator's local roots (`CALCGRAPH_GIT_LOCAL_ROOTS`, none by
  default): the server's own disk is not a package source. A refusal reads the same whether
  the path exists or not. Transport helpers (`ext::`), ssh, scp-like and option-looking
  (`-...`) URLs are refused; git is also told `protocol.allow=never` except for those
  schemes, which covers redirects and submodules;
- no hooks (`core.hooksPath=/dev/null`, no template), no submodules, no LFS or other filter
  driver, no system or user git config, no credential prompt; symlinks are checked out as
  plain files (`core.symlinks=false`), so reading the working tree can never follow a link
  out of it; objects are fsck-checked;
- shallow fetches (`--depth=1`) of exactly the wanted ref; only a short commit SHA that no
  branch or tag points at needs the full history to be resolved.

Name resolution: a tag wins over a branch of the same name, and names win over hex strings.
The URL and ref checks, and the redaction of credentials, are in `git_checks.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from calcgraph.domain.errors import InvalidRequest, NotFound
from calcgraph.settings import Settings
from calcgraph.sources.git_checks import check_git_url, check_ref, redact

RefKind = Literal["tag", "branch", "commit"]

_HEX = re.compile(r"^[0-9a-fA-F]{7,40}$")
_POLL_SECONDS = 0.05
_SHOWN_NAMES = 30


@dataclass(frozen=True)
class GitCheckout:
    url: str
    """The URL as given, with any credentials removed."""
    ref: str
    ref_kind: RefKind
    commit: str
    """Full 40-hex SHA of the checked-out commit (tags are peeled to their commit)."""
    directory: Path
    files: Mapping[str, bytes]
    """Every regular file of the commit by POSIX path, `.git` excluded."""


class _Git:
    """One fetch: the git binary, a hermetic environment, and the limits being enforced."""

    def __init__(
        self, url: str, directory: Path, home: Path, max_bytes: int, schemes: Collection[str]
    ) -> None:
        git = shutil.which("git")
        if git is None:
            raise InvalidRequest("git is not installed on this server")
        self.git = git
        self.url = url
        self.directory = directory
        self.max_bytes = max_bytes
        self.too_large = False
        self.config = [
            "-c", "protocol.allow=never",
            *(arg for s in sorted(schemes) for arg in ("-c", f"protocol.{s}.allow=always")),
            "-c", "core.hooksPath=/dev/null",
            "-c", "core.symlinks=false",
            "-c", "core.fsmonitor=false",
            "-c", "transfer.fsckObjects=true",
            "-c", "submodule.recurse=false",
            "-c", "fetch.recurseSubmodules=false",
            # No LFS nor any other filter driver runs on checkout.
            "-c", "filter.lfs.smudge=",
            "-c", "filter.lfs.process=",
            "-c", "filter.lfs.required=false",
            "-c", "credential.helper=",
            "-c", "advice.detachedHead=false",
        ]  # fmt: skip
        # A hermetic environment: no user or system config, no prompt for credentials.
        self.env = {
            "PATH": f"{Path(git).parent}:/usr/bin:/bin",
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "LC_ALL": "C",
            "GIT_LFS_SKIP_SMUDGE": "1",
            "GIT_PROTOCOL_FROM_USER": "0",
        }

    async def run(self, *args: str, watch: bool = False) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            self.git,
            *self.config,
            *args,
            cwd=self.directory,
            env=self.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, so a kill reaches helpers
        )
        watcher = asyncio.create_task(self._watch(proc)) if watch else None
        try:
            out, err = await proc.communicate()
        finally:
            if proc.returncode is None:
                _kill(proc)
                await proc.wait()
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
        if self.too_large:
            raise self.size_error()
        return proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace")

    async def must(self, what: str, *args: str, watch: bool = False) -> str:
        code, out, err = await self.run(*args, watch=watch)
        if code != 0:
            raise InvalidRequest(f"{what} failed for {redact(self.url)}: {_last_line(err)}")
        return out

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        while proc.returncode is None:
            if await asyncio.to_thread(tree_size, self.directory) > self.max_bytes:
                self.too_large = True
                _kill(proc)
                return
            await asyncio.sleep(_POLL_SECONDS)

    def size_error(self) -> InvalidRequest:
        return InvalidRequest(
            f"git repository {redact(self.url)} is larger than the limit of {self.max_bytes} bytes"
        )


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _last_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return redact(lines[-1]) if lines else "no message from git"


def _prepare(destination: Path) -> Path:
    """Create the checkout directory (it must be empty) and a private HOME for git."""
    destination.mkdir(parents=True, exist_ok=True)
    if any(destination.iterdir()):
        raise InvalidRequest(f"checkout directory {destination} is not empty")
    return Path(tempfile.mkdtemp(prefix="calcgraph-git-home-"))


def tree_size(directory: Path) -> int:
    """Bytes of the regular files under a directory (not following links)."""
    total = 0
    for root, _dirs, names in os.walk(directory):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def read_files(directory: Path, max_bytes: int) -> dict[str, bytes]:
    """Every regular file of a checkout except `.git`, by POSIX path."""
    files: dict[str, bytes] = {}
    total = 0
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not (root == str(directory) and d == ".git"))
        for name in sorted(names):
            path = Path(root, name)
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
            total += len(data)
            if total > max_bytes:
                raise InvalidRequest(f"the checked-out files exceed the limit of {max_bytes} bytes")
            files[path.relative_to(directory).as_posix()] = data
    return files


@dataclass(frozen=True)
class _Refs:
    tags: dict[str, str]
    branches: dict[str, str]

    def names(self) -> str:
        def shown(names: list[str]) -> str:
            more = f" and {len(names) - _SHOWN_NAMES} more" if len(names) > _SHOWN_NAMES else ""
            return ", ".join(names[:_SHOWN_NAMES]) + more if names else "none"

        return f"tags: {shown(sorted(self.tags))}; branches: {shown(sorted(self.branches))}"


def _parse_ls_remote(output: str) -> _Refs:
    tags: dict[str, str] = {}
    peeled: dict[str, str] = {}
    branches: dict[str, str] = {}
    for line in output.splitlines():
        sha, _, name = line.partition("\t")
        if name.startswith("refs/tags/"):
            tag = name[len("refs/tags/") :]
            if tag.endswith("^{}"):
                peeled[tag[:-3]] = sha
            else:
                tags[tag] = sha
        elif name.startswith("refs/heads/"):
            branches[name[len("refs/heads/") :]] = sha
    tags.update({t: sha for t, sha in peeled.items() if t in tags})
    return _Refs(tags, branches)


async def _resolve_commit(git: _Git, ref: str, refs: _Refs) -> str:
    """Fetch the commit a SHA names and return its full SHA."""
    tips = {sha for sha in (*refs.tags.values(), *refs.branches.values())}
    full = [sha for sha in tips if sha.startswith(ref.lower())]
    if len(ref) == 40 or len(full) == 1:
        sha = ref.lower() if len(ref) == 40 else full[0]
        code, _, _ = await git.run(
            "fetch", "-q", "--no-tags", "--depth=1", git.url, sha, watch=True
        )
        if code == 0:
            return sha
    # A short SHA inside the history (or a server that refuses unadvertised objects):
    # resolving it needs every commit.
    await git.must(
        "git fetch",
        "fetch", "-q", "--no-tags", git.url,
        "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*",
        watch=True,
    )  # fmt: skip
    code, out, err = await git.run("rev-parse", "--verify", "--quiet", f"{ref.lower()}^{{commit}}")
    if code != 0:
        ambiguous = " (ambiguous: give more digits)" if "ambiguous" in err else ""
        raise NotFound(
            f"no tag, branch or commit {ref!r} in {redact(git.url)}{ambiguous}; {refs.names()}",
            {"tags": sorted(refs.tags), "branches": sorted(refs.branches)},
        )
    return out.strip()


async def _fetch(git: _Git, ref: str) -> tuple[RefKind, str]:
    await git.must("git init", "init", "-q", "--template=", ".")
    listing = await git.must("git ls-remote", "ls-remote", "--tags", "--heads", git.url)
    refs = _parse_ls_remote(listing)
    name = ref
    for prefix in ("refs/tags/", "refs/heads/"):
        if ref.startswith(prefix) and ref[len(prefix) :]:
            name = ref[len(prefix) :]
    if name in refs.tags and not ref.startswith("refs/heads/"):
        spec = f"+refs/tags/{name}:refs/tags/{name}"
        kind: RefKind = "tag"
        local = f"refs/tags/{name}"
    elif name in refs.branches and not ref.startswith("refs/tags/"):
        spec = f"+refs/heads/{name}:refs/remotes/origin/{name}"
        kind = "branch"
        local = f"refs/remotes/origin/{name}"
    elif _HEX.match(ref):
        return "commit", await _resolve_commit(git, ref, refs)
    else:
        raise NotFound(
            f"no tag, branch or commit {ref!r} in {redact(git.url)}; {refs.names()}",
            {"tags": sorted(refs.tags), "branches": sorted(refs.branches)},
        )
    await git.must("git fetch", "fetch", "-q", "--no-tags", "--depth=1", git.url, spec, watch=True)
    commit = await git.must("git rev-parse", "rev-parse", "--verify", f"{local}^{{commit}}")
    return kind, commit.strip()


async def fetch_repository(
    git_url: str,
    ref: str,
    destination: Path,
    *,
    timeout_seconds: float,
    max_bytes: int,
    allowed_schemes: Collection[str] = ("https",),
    local_roots: Collection[Path] = (),
) -> GitCheckout:
    """Check out `ref` of `git_url` into `destination` (created; must not exist or be empty).

    `timeout_seconds` bounds the whole operation and `max_bytes` the repository on disk
    (`.git` included) and the files read; the caller passes them from settings.
    """
    url = check_git_url(git_url, allowed_schemes, local_roots)
    ref = check_ref(ref)
    home = await asyncio.to_thread(_prepare, destination)
    schemes = {s for s in allowed_schemes if s != "file"}
    if url.startswith("file:"):
        schemes.add("file")
    git = _Git(url, destination, home, max_bytes, schemes)
    try:
        async with asyncio.timeout(timeout_seconds):
            kind, commit = await _fetch(git, ref)
            await git.must("git checkout", "checkout", "-q", "--detach", commit, watch=True)
    except TimeoutError:
        raise InvalidRequest(
            f"fetching {redact(url)} at {ref!r} took longer than {timeout_seconds:g} s"
        ) from None
    finally:
        await asyncio.to_thread(shutil.rmtree, home, True)
    if await asyncio.to_thread(tree_size, destination) > max_bytes:
        raise git.size_error()
    files = await asyncio.to_thread(read_files, destination, max_bytes)
    return GitCheckout(redact(git_url.strip()), ref, kind, commit, destination, files)


@dataclass(frozen=True)
class GitSources:
    """Publishing's `SourceFetcher` on git, within the operator's bounds from settings. Each
    fetch clones into its own temporary directory, removed once the files are read."""

    settings: Settings

    async def fetch(self, url: str, ref: str) -> GitCheckout:
        workdir = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="calcgraph-deploy-"))
        try:
            return await fetch_repository(
                url,
                ref,
                workdir / "checkout",
                timeout_seconds=self.settings.git_clone_timeout_seconds,
                max_bytes=self.settings.git_max_repository_bytes,
                allowed_schemes=self.settings.git_allowed_schemes,
                local_roots=self.settings.git_local_roots,
            )
        finally:
            await asyncio.to_thread(shutil.rmtree, workdir, True)
