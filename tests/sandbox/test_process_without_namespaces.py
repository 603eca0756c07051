"""The process sandbox as root confines every job in a mount and a network namespace of its own.
Where the kernel refuses them (root in a container without CAP_SYS_ADMIN, found on the bare
Debian container of scripts/bare-debian.sh), the backend refuses to start with a message that
says what to use, instead of failing every job with `confinement failed`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.sandbox.conftest import skip_unless_process_backend

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and util-linux's setpriv to drop CAP_SYS_ADMIN from a child",
)

SCRIPT = """
from calcgraph.workers.sandbox import SandboxUnavailable
from calcgraph.workers.sandbox.process import ProcessBackend
try:
    ProcessBackend()
except SandboxUnavailable as exc:
    print("refused:", exc)
else:
    print("started")
"""


def _run(*prefix: str) -> str:
    done = subprocess.run(
        [*prefix, sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_root_without_cap_sys_admin_refuses_to_start_naming_the_fix() -> None:
    answer = _run("setpriv", "--bounding-set=-sys_admin")
    assert answer.startswith("refused:"), answer
    assert "CALCGRAPH_SANDBOX=bwrap" in answer


def test_root_with_namespaces_starts() -> None:
    skip_unless_process_backend()
    assert _run() == "started"
