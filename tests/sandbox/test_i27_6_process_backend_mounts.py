"""Issue 27, point 6: the process backend reads host files and every host process's command
line. Run by root it now takes a mount namespace in which every mount is read-only (but its
private /tmp) and /proc shows only its own processes; what it still cannot do, its warning
says (contract section 8b)."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

import pytest

from calcgraph.workers.sandbox import Limits, RunRequest, SandboxBackend
from calcgraph.workers.sandbox.process import ProcessBackend
from calcgraph.workers.sandbox.staging import STAGE_DIR
from tests.sandbox.conftest import TEST_TIMEOUT, skip_unless_process_backend

SOURCE = """
import os

def main(shared):
    others = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as status:
                    uid = [l.split()[1] for l in status if l.startswith("Uid:")][0]
            except OSError:
                continue
            if int(uid) != os.getuid():
                others.append(int(entry))
    try:
        with open(os.path.join(shared, "planted"), "w") as planted:
            planted.write("x")
        wrote = True
    except OSError as exc:
        wrote = str(exc)
    try:
        open("/proc/1/cmdline", "rb").read()
        init = True
    except OSError:
        init = False
    with open("/tmp/mine", "w") as mine:
        mine.write("ok")
    return {"others": others, "wrote": wrote, "init": init}
"""


@pytest.fixture
def process_backend(sandbox_backend: SandboxBackend) -> SandboxBackend:
    if sandbox_backend.name != "process":
        pytest.skip("the process backend's own confinement")
    if os.geteuid() != 0:
        pytest.skip("a mount namespace needs root")
    return sandbox_backend


def test_host_files_are_read_only_and_other_processes_invisible(
    process_backend: SandboxBackend, tmp_path: Path
) -> None:
    # Outside /tmp (the sandbox has a private one): a host folder anyone may write to.
    shared = STAGE_DIR.parent / f"test-world-writable-{uuid.uuid4().hex[:8]}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    code = tmp_path / "code"
    code.mkdir()
    (code / "job.py").write_text(SOURCE)
    request = RunRequest(
        code, "job:main", {"shared": str(shared)}, (), Limits(timeout_seconds=TEST_TIMEOUT)
    )
    try:
        result = process_backend.run(request)
    finally:
        planted = (shared / "planted").exists()
        shutil.rmtree(shared)
    assert result.status == "success", result
    assert result.outputs is not None
    assert "Read-only file system" in str(result.outputs["wrote"]), result.outputs
    assert not planted
    assert result.outputs["others"] == []
    assert result.outputs["init"] is False
    assert process_backend.enforcement()["read_only_fs"] != "NOT ENFORCED"


def test_the_warning_says_what_is_left(caplog: pytest.LogCaptureFixture) -> None:
    skip_unless_process_backend()
    with caplog.at_level(logging.WARNING):
        ProcessBackend()
    [warning] = [r.getMessage() for r in caplog.records if "SINGLE TRUSTED USER" in r.message]
    assert "read every host file its mode lets any user read" in warning
