"""Function code staged from `code_blobs` into a content-addressed directory, reused across jobs.

The directory's name is the digest of its file list (path and SHA-256 of each file), so two
function versions with the same files share it and a warm sandbox's spec stays equal from one
job to the next. A directory is written under a temporary name and renamed into place: a
concurrent worker either sees the complete directory or none, never half of one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

BlobLoader = Callable[[list[str]], Mapping[str, bytes]]


class CodeError(Exception):
    """The stored code is unusable (a blob is missing or does not match its digest)."""


def tree_key(files: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    for path, sha in sorted(files.items()):
        digest.update(f"{path}\0{sha}\n".encode())
    return digest.hexdigest()


def _safe(path: str) -> PurePosixPath:
    pure = PurePosixPath(path)
    if pure.is_absolute() or not pure.parts or any(p in ("..", ".", "") for p in pure.parts):
        raise CodeError(f"refusing to stage the file path {path!r}")
    return pure


class CodeCache:
    """Every function's code, the worker's alone: folders 0700, files 0600, so neither a job of
    another function nor any other local user reads it (the sandboxes get their own copies)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or Path(tempfile.gettempdir()) / f"calcgraph-code-{os.getuid()}"
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._tighten(self.root)
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def stage(self, files: Mapping[str, str], load: BlobLoader) -> Path:
        """The directory holding `files` (path -> sha256), written from `load` when missing."""
        key = tree_key(files)
        final = self.root / key
        with self._lock:
            if key in self._known:
                return final
        if not final.is_dir():
            self._write(final, files, load)
        with self._lock:
            self._known.add(key)
        return final

    def _write(self, final: Path, files: Mapping[str, str], load: BlobLoader) -> None:
        blobs = load(sorted(set(files.values())))
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=self.root))
        try:
            for path, sha in files.items():
                content = blobs.get(sha)
                if content is None:
                    raise CodeError(f"the code blob of {path!r} ({sha[:12]}) is missing")
                if hashlib.sha256(content).hexdigest() != sha:
                    raise CodeError(f"the code blob of {path!r} does not match its digest")
                target = staging.joinpath(*_safe(path).parts)
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(content)
            try:
                os.rename(staging, final)
            except OSError:
                # Another worker renamed the same content into place first: theirs is ours.
                if not final.is_dir():
                    raise
                shutil.rmtree(staging, ignore_errors=True)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    @staticmethod
    def _tighten(root: Path) -> None:
        """Bring a cache an older worker left world-readable (0755/0644) to 0700/0600."""
        if root.stat().st_uid != os.getuid():
            raise CodeError(f"the code cache {root} belongs to another user; refusing to use it")
        for dirpath, _dirnames, filenames in os.walk(root):  # symlinked folders are not entered
            os.chmod(dirpath, 0o700)
            for name in filenames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    os.chmod(path, 0o600)
