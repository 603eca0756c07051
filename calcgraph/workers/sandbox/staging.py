"""Host-side helpers shared by the local backends: a readable copy of the code, spare uids."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shutil
import stat
import sys
import tempfile
import threading
from pathlib import Path

from calcgraph.workers.sandbox.base import SandboxError

_PREFIX = "calcgraph-sbx-"
STAGE_DIR = Path("/var/lib/calcgraph/sandboxes")
"""Where a root-run worker stages code (bwrap, process): outside /tmp, under a neutral path."""
_uid_lock = threading.Lock()
_uid_counter = itertools.count()


def stage_code(code_dir: Path, parent: Path | None = None, gid: int | None = None) -> Path:
    """Copy `code_dir` into a fresh directory that the sandbox can read but not write.

    The caller's directory may be private to the worker (0700, as pytest's tmp dirs are). The
    copy stays owned by the worker; with `gid` (the sandbox's group, when the worker is root) it
    is readable by that group only, so one function's sandbox cannot read another's code.
    Without `gid` (the sandbox runs as the worker's own uid) it is the worker's alone: 0700/0600.
    A copy that fails is the job's `infrastructure_error` (SandboxError), for every backend.
    """
    try:
        return _stage(code_dir, parent, gid)
    except OSError as exc:
        raise SandboxError("infrastructure_error", f"cannot stage the code: {exc}") from exc


def _stage(code_dir: Path, parent: Path | None, gid: int | None) -> Path:
    if not code_dir.is_dir():
        raise FileNotFoundError(f"code directory {code_dir} does not exist")
    # The worker's pid in the name lets a later worker remove what a crashed one left.
    root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=parent))
    dir_mode, file_mode = (0o750, 0o640) if gid is not None else (0o700, 0o600)
    _own(str(root), dir_mode, gid)
    target = root / "code"
    shutil.copytree(code_dir, target, symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
    for dirpath, _dirnames, filenames in os.walk(target):
        _own(dirpath, dir_mode, gid)
        for name in filenames:
            path = os.path.join(dirpath, name)
            executable = stat.S_IMODE(os.stat(path).st_mode) & 0o100
            _own(path, file_mode | (executable and dir_mode & 0o111), gid)
    return root


def _own(path: str, mode: int, gid: int | None) -> None:
    if gid is not None:
        os.chown(path, -1, gid)
    os.chmod(path, mode)


def remove_staged(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)


def remove_stale_staging(parent: Path | None = None) -> None:
    """Remove the staged directories of workers of this machine that are no longer running."""
    base = Path(parent or tempfile.gettempdir())
    for path in base.glob(f"{_PREFIX}*-*"):
        pid = path.name[len(_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            remove_staged(path)


def staging_parent(as_root: bool) -> Path | None:
    """Where a backend stages code: as root `STAGE_DIR` (made if missing; outside /tmp, which
    a root-run sandbox gets a private one of), else the temporary folder (None). What workers
    of this machine that are gone left there is removed first."""
    parent = STAGE_DIR if as_root else None
    if parent is not None:
        parent.mkdir(mode=0o711, parents=True, exist_ok=True)
    remove_stale_staging(parent)
    return parent


def allocate_uid(base: int, span: int = 1_000_000) -> int:
    """A uid no other live sandbox of this machine uses: per-sandbox uids make RLIMIT_NPROC and
    the final kill(-1) apply to one sandbox only. Worker processes take disjoint slices by pid."""
    with _uid_lock:
        serial = next(_uid_counter)
    return base + ((os.getpid() % 1000) * 1000 + serial % 1000) % span


def traversable_by_others(path: Path) -> bool:
    """Whether a uid with no relation to the owner can reach and execute `path`."""
    real = Path(os.path.realpath(path))
    for part in [*reversed(real.parents), real]:
        mode = os.stat(part).st_mode
        if not mode & stat.S_IXOTH:
            return False
    return bool(os.stat(real).st_mode & stat.S_IROTH) or real.is_file()


def user_process_count(uid: int) -> int:
    """Processes of `uid` now: the base of RLIMIT_NPROC when the sandbox shares the user's uid."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
    return count


_INTERPRETER_DIR = Path("/var/lib/calcgraph/python")
# Not needed to run a handler: the base interpreter's own packages, tests, GUI and tooling.
_NOT_NEEDED = ("site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3")


def neutral_interpreter(prefix: Path) -> Path:
    """A copy of what a sandbox needs of the interpreter installed at `prefix` (its python3,
    libpython, the standard library), under a neutral folder made once per installation: a
    sandbox's mount table names the source of each bind, which must not be the host's install
    folder (a home directory, say). Root only; reused while the installation is unchanged."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    binary = prefix / "bin" / version
    marker = f"{prefix}:{binary.stat().st_mtime_ns}".encode()
    target = _INTERPRETER_DIR / f"{version}-{hashlib.sha256(marker).hexdigest()[:16]}"
    if target.is_dir():
        return target
    _INTERPRETER_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".build-", dir=_INTERPRETER_DIR))
    try:
        (building / "bin").mkdir()
        shutil.copy2(binary, building / "bin" / version)
        os.symlink(version, building / "bin" / "python3")
        (building / "lib").mkdir()
        for library in prefix.glob(f"lib/lib{version}*.so*"):
            shutil.copy2(library, building / "lib" / library.name, follow_symlinks=True)
        shutil.copytree(
            prefix / "lib" / version,
            building / "lib" / version,
            symlinks=True,
            ignore=shutil.ignore_patterns(*_NOT_NEEDED, "config-*"),
        )
        os.chmod(building, 0o755)
        try:
            os.rename(building, target)
        except OSError:  # another worker made it first
            shutil.rmtree(building, ignore_errors=True)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return target
