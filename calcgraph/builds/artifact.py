"""The embedded builder (bwrap and process sandboxes): a content-addressed artifact directory.

Layout of `<build_dir>/artifacts/<sha256>/`: `code/main.py` (the function's code) and `deps/`
(its requirements, `pip install --target`). The sandboxes mount `code/` as the code directory
and `deps/` read-only as `deps_dir`. The address is the SHA-256 of the tree (relative paths and
contents), so the same code and wheels land in the same directory, written once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from calcgraph.builds.logs import BuildLog
from calcgraph.builds.pip import Deadline, PipOptions, pip_install

ARTIFACT_PREFIX = "artifact:"
CODE_DIR = "code"
DEPS_DIR = "deps"


@dataclass(frozen=True)
class BuiltArtifact:
    reference: str
    """`artifact:<sha256>` or `docker:<image>`: what `Build.docker_image` keeps."""
    size_bytes: int
    deps_dir: Path
    """Where the installed requirements are, for the scanner."""
    reused: bool = False
    """The same content was stored by an earlier build."""


def artifacts_root(build_dir: Path) -> Path:
    return build_dir / "artifacts"


def artifact_path(build_dir: Path, reference: str) -> Path:
    """The directory of `artifact:<sha256>`; its `code/` and `deps/` are what a sandbox mounts."""
    digest = reference.removeprefix(ARTIFACT_PREFIX)
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"not an artifact reference: {reference!r}")
    return artifacts_root(build_dir) / digest


@dataclass(frozen=True)
class BuildInputs:
    """What either builder (artifact or image) builds from: the function's files and its
    requirements, how pip finds them, the build's deadline and its log."""

    files: dict[str, str]
    requirements: Sequence[str]
    pip_options: PipOptions
    deadline: Deadline
    log: BuildLog

    def stage(self, root: Path) -> None:
        """The files under `root/code`, the requirements installed into `root/deps`."""
        code = root / CODE_DIR
        code.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (code / name).write_text(text, encoding="utf-8")
        pip_install(self.requirements, root / DEPS_DIR, self.pip_options, self.deadline, self.log)


def tree_digest(root: Path) -> tuple[str, int]:
    """SHA-256 over every file's relative path and content, and the total size in bytes."""
    digest = hashlib.sha256()
    size = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        size += len(data)
        relative = path.relative_to(root).as_posix()
        digest.update(f"{relative}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return digest.hexdigest(), size


def build_artifact(build_dir: Path, inputs: BuildInputs) -> BuiltArtifact:
    log = inputs.log
    root = artifacts_root(build_dir)
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        inputs.stage(work)
        digest, size = tree_digest(work)
        final = root / digest
        reused = final.exists()
        if reused:
            log.write(f"artifact {digest} already stored: reused")
        else:
            # Readable by the sandbox users; rename is atomic within one filesystem.
            for dirpath, _dirs, names in os.walk(work):
                os.chmod(dirpath, 0o755)
                for name in names:
                    os.chmod(os.path.join(dirpath, name), 0o644)
            try:
                os.rename(work, final)
            except OSError:
                if not final.exists():  # not a concurrent build of the same content
                    raise
            log.write(f"artifact stored: {final}")
        reference = ARTIFACT_PREFIX + digest
        log.write(f"artifact {reference}: {size} bytes")
        inputs.deadline.remaining()
        return BuiltArtifact(reference, size, final / DEPS_DIR, reused)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def delete_artifact(build_dir: Path, reference: str) -> bool:
    path = artifact_path(build_dir, reference)
    if not path.exists():
        return False
    shutil.rmtree(path)
    return True


@dataclass(frozen=True)
class RunnableBuild:
    """What a sandbox needs from a build: `image` for docker, `code_dir`/`deps_dir` for bwrap
    and process (the code can also be staged from the package files, as for any version)."""

    image: str | None
    code_dir: Path | None
    deps_dir: Path | None


def runnable(build_dir: Path, reference: str) -> RunnableBuild:
    """`Build.docker_image` (`docker:<image>` or `artifact:<sha256>`) as sandbox inputs."""
    if reference.startswith("docker:"):
        return RunnableBuild(reference.removeprefix("docker:"), None, None)
    root = artifact_path(build_dir, reference)
    return RunnableBuild(None, root / CODE_DIR, root / DEPS_DIR)
