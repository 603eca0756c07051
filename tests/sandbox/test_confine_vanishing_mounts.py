"""The process backend makes every mount of its namespace read-only from the mount table it
read first. The host's unmounts reach that namespace meanwhile (a Docker container's overlay
torn down as a job starts, seen in `make test` beside the docker tests): remounting a point
that is no longer mounted answers EINVAL, and the job failed with `confinement failed`. A point
gone since the table was read is skipped; any other refusal still fails the job."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import pytest

from calcgraph.workers.sandbox import confine

_CLONE_NEWNS = 0x00020000
_MS_REC, _MS_PRIVATE = 0x4000, 0x40000


class _UnmountsFirst:
    """libc, except that the remount of `gone` finds it unmounted, as a host's unmount
    between the table's read and the remount leaves it (a real unmount, a real EINVAL)."""

    def __init__(self, libc: Any, gone: bytes) -> None:
        self.libc, self.gone = libc, gone

    def mount(self, source: Any, target: bytes, kind: Any, flags: int, data: Any) -> int:
        if target == self.gone and self.libc.umount2(self.gone, 0) != 0:
            return -1
        result: int = self.libc.mount(source, target, kind, flags, data)
        return result


def _in_a_namespace_of_its_own(gone: Path) -> int:
    """In a forked child: a private mount namespace, a tmpfs at `gone`, then every mount made
    read-only while `gone` vanishes. The child's exit status: 0 when that went through."""
    pid = os.fork()
    if pid == 0:
        status = 3
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(_CLONE_NEWNS) != 0:
                os._exit(4)
            libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None)
            if libc.mount(b"tmpfs", str(gone).encode(), b"tmpfs", 0, b"size=1m") != 0:
                os._exit(5)
            confine._read_only_mounts(_UnmountsFirst(libc, str(gone).encode()), ())
            status = 0
        except OSError:
            status = 1
        finally:
            os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_a_mount_gone_since_the_table_was_read_is_skipped(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a mount namespace of its own needs root")
    gone = tmp_path / "gone"
    gone.mkdir()
    assert _in_a_namespace_of_its_own(gone) == 0


def test_mounted_reads_the_mount_table_of_this_namespace() -> None:
    assert confine._mounted("/")
    assert not confine._mounted("/no/such/mount/point")
