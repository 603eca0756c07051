"""Issue 27, point 6: a job never shows the host's paths (contract section 8b).

bwrap was pid 1 of its sandbox with every bind's host path on its command line, and the mount
table named the interpreter's install folder and the worker's code cache. On bwrap and docker
(the process backend shares the host's /proc and mounts: docs/sandboxes.md says so)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from calcgraph.workers.sandbox import Limits, RunRequest, SandboxBackend
from tests.sandbox.conftest import TEST_TIMEOUT

SOURCE = """
def main():
    with open("/proc/1/cmdline", "rb") as cmdline, open("/proc/self/mountinfo") as mounts:
        text = cmdline.read().replace(b"\\0", b" ").decode("utf-8", "replace")
        return {"cmdline": text, "mounts": mounts.read()}
"""


def test_proc_1_cmdline_and_mountinfo_name_no_host_folder(
    sandbox_backend: SandboxBackend, tmp_path: Path
) -> None:
    if sandbox_backend.name == "process":
        pytest.skip("the process backend shares the host's /proc (documented)")
    code = tmp_path / "host-only-folder-7f3a" / "code-cache"
    code.mkdir(parents=True)
    (code / "job.py").write_text(SOURCE)
    request = RunRequest(code, "job:main", {}, (), Limits(timeout_seconds=TEST_TIMEOUT))
    result = sandbox_backend.run(request)
    assert result.status == "success", result
    assert result.outputs is not None
    seen = result.outputs
    for where in ("cmdline", "mounts"):
        text = seen[where]
        assert "host-only-folder-7f3a" not in text, text
        assert str(tmp_path) not in text, text
        if not sys.base_prefix.startswith("/usr"):
            assert sys.base_prefix not in text, text


LISTING = """
import os
import sysconfig


def main():
    seen = {}
    for folder in ("/", "/usr", "/usr/bin", "/usr/lib", "/etc"):
        try:
            seen[folder] = sorted(os.listdir(folder))
        except OSError as exc:
            seen[folder] = [f"error: {exc.strerror}"]
    # The interpreter's own standard library is bound where it lives (/usr/lib/python3.11 on
    # a Debian Python): the libraries counted are the rest.
    stdlib = sysconfig.get_paths()["stdlib"]
    libraries = []
    for root, folders, files in os.walk("/usr/lib"):
        folders[:] = [f for f in folders if os.path.join(root, f) != stdlib]
        libraries += files
    seen["libraries"] = sorted(libraries)
    return seen
"""

USR_BIN = Path("/usr/bin")


def _links_to(path: Path) -> list[Path]:
    """`path` and every path its symbolic links lead through, to the file itself."""
    hops = [path]
    while hops[-1].is_symlink() and len(hops) < 40:
        hops.append(Path(os.path.normpath(hops[-1].parent / os.readlink(hops[-1]))))
    return hops


# What any job needs of the host: the top-level links to /usr, the interpreter, the code.
_ROOT_ENTRIES = {"bin", "sbin", "lib", "lib64", "lib32", "libx32", "usr", "opt", "code", "deps",
                 "proc", "dev", "tmp"}  # fmt: skip


def test_bwrap_binds_only_what_jobs_need_not_all_of_usr(
    sandbox_backend: SandboxBackend, tmp_path: Path
) -> None:
    """Listing / and /usr inside a job on bwrap shows the interpreter and the libraries it
    links, not the host's programs, /etc or the rest of /usr."""
    if sandbox_backend.name != "bwrap":
        pytest.skip("bwrap's binds (docker runs its own image; process shares the host's)")
    code = tmp_path / "listing"
    code.mkdir()
    (code / "job.py").write_text(LISTING)
    request = RunRequest(code, "job:main", {}, (), Limits(timeout_seconds=TEST_TIMEOUT))
    result = sandbox_backend.run(request)
    assert result.status == "success", result
    assert result.outputs is not None
    seen = result.outputs
    assert set(seen["/"]) <= _ROOT_ENTRIES, seen["/"]
    assert "etc" not in seen["/"]
    assert set(seen["/usr"]) <= {"lib", "lib64", "lib32", "libx32", "bin"}, seen["/usr"]
    # The interpreter itself is bound where it lives: on a Debian Python, /usr/bin/python3
    # (the venv's link) and /usr/bin/python3.11; nothing else of /usr/bin.
    interpreter = {hop.name for hop in _links_to(Path(sys.executable)) if hop.parent == USR_BIN}
    for program in {"sh", "bash", "env", "apt-get", "python3", "bwrap", "docker", "psql"}:
        if program not in interpreter:
            assert program not in seen["/usr/bin"], seen["/usr/bin"]
    libraries = set(seen["libraries"])
    assert "libc.so.6" in libraries
    assert len(libraries) < 40, sorted(libraries)
    for host_only in ("libsystemd.so.0", "libpq.so.5", "libapt-pkg.so.6.0"):
        assert host_only not in libraries
