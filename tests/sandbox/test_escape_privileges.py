"""The escape battery, part 2: privileges, host secrets, the timeout, import-blacklist evasions
and output. Every attempt must fail on every backend this machine has."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from calcgraph.workers.sandbox import Limits, MiB, SandboxBackend
from tests.sandbox.conftest import Runner, contained, require

# --- privileges ------------------------------------------------------------------------------

STATUS = """
def main():
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return fields
"""


def test_no_capabilities(run: Runner) -> None:
    status = contained(run(STATUS))
    for name in ("CapEff", "CapPrm", "CapAmb", "CapBnd"):
        assert int(status[name][0], 16) == 0, (name, status[name])  # type: ignore[index]


def test_not_root(run: Runner) -> None:
    status = contained(run(STATUS))
    assert all(int(uid) != 0 for uid in status["Uid"])  # type: ignore[attr-defined]
    assert all(int(gid) != 0 for gid in status["Gid"])  # type: ignore[attr-defined]


def test_no_new_privileges(run: Runner) -> None:
    assert contained(run(STATUS))["NoNewPrivs"] == ["1"]


def test_setuid_root(run: Runner) -> None:
    source = """
    import os
    def main():
        try:
            os.setuid(0)
            return {"escaped": True}
        except OSError as exc:
            return {"escaped": False, "error": repr(exc)}
    """
    assert contained(run(source))["escaped"] is False


LIBC = """
import ctypes, os
def main(call):
    libc = ctypes.CDLL(None, use_errno=True)
    calls = {
        "unshare_user": lambda: libc.unshare(0x10000000),
        "mount_tmpfs": lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None),
        "chroot": lambda: libc.chroot(b"/tmp"),
        "mknod_mem": lambda: libc.mknod(b"/tmp/mem", 0o20600, os.makedev(1, 1)),
    }
    code = calls[call]()
    return {"escaped": code == 0, "errno": ctypes.get_errno()}
"""


@pytest.mark.parametrize("call", ["unshare_user", "mount_tmpfs", "chroot", "mknod_mem"])
def test_privileged_syscalls(sandbox_backend: SandboxBackend, run: Runner, call: str) -> None:
    if call == "unshare_user":
        require(sandbox_backend, "user_namespaces")
    assert contained(run(LIBC, {"call": call}))["escaped"] is False


# --- host secrets ----------------------------------------------------------------------------


def test_docker_socket(run: Runner) -> None:
    source = """
    import socket
    def main():
        reached = []
        for path in ("/var/run/docker.sock", "/run/docker.sock"):
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(path)
                s.sendall(b"GET /containers/json HTTP/1.0\\r\\n\\r\\n")
                reached.append(path)
            except OSError:
                pass
            try:
                open(path, "rb").close()
                reached.append(path + " (open)")
            except OSError:
                pass
        return {"reached": reached}
    """
    assert contained(run(source))["reached"] == []


def test_host_environment(run: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    monkeypatch.setenv("CALCGRAPH_TEST_HOST_SECRET", secret)
    source = """
    import os
    def main(secret):
        found = [k for k, v in os.environ.items() if secret in v]
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    with open(f"/proc/{pid}/environ", "rb") as environ:
                        if secret.encode() in environ.read():
                            found.append(pid)
                except OSError:
                    pass
        return {"found": found, "environ": sorted(os.environ)}
    """
    outputs = contained(run(source, {"secret": secret}))
    assert outputs["found"] == []
    allowed = {"PATH", "HOME", "TMPDIR", "LANG", "HOSTNAME", "PWD", "LD_LIBRARY_PATH"}
    assert set(outputs["environ"]) <= allowed  # type: ignore[arg-type]


def test_host_secret_files(run: Runner) -> None:
    source = """
    import os
    def main():
        read = []
        for path in ("/etc/shadow", "/root/.bash_history", "/proc/1/root/etc/shadow"):
            try:
                with open(path, "rb") as handle:
                    handle.read(1)
                read.append(path)
            except OSError:
                pass
        try:
            os.listdir("/root")
            read.append("/root (listed)")
        except OSError:
            pass
        return {"read": read}
    """
    assert contained(run(source))["read"] == []


def test_other_function_code(
    sandbox_backend: SandboxBackend, run: Runner, make_code: object
) -> None:
    """A sandbox cannot read the code of another function's warm sandbox on the same worker."""
    from calcgraph.workers.sandbox import SandboxSpec
    from calcgraph.workers.sandbox.session import RunnerSandbox

    secret = f"proprietary-{uuid.uuid4().hex}"
    other_dir = make_code(job=f"SECRET = {secret!r}\ndef main():\n    return 1\n")  # type: ignore[operator]
    other = sandbox_backend.start(
        SandboxSpec(other_dir, "job:main", (), Limits(timeout_seconds=20))
    )
    try:
        assert isinstance(other, RunnerSandbox)
        source = """
        def main(path):
            try:
                with open(path + "/job.py") as handle:
                    return {"escaped": True, "text": handle.read()}
            except OSError as exc:
                return {"escaped": False, "error": repr(exc)}
        """
        outputs = contained(run(source, {"path": other.details["code_dir"]}))
        assert outputs["escaped"] is False, outputs
    finally:
        other.close()


# --- time ------------------------------------------------------------------------------------


def _processes_with(token: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    if token.encode() in cmdline.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def test_sleep_past_timeout_is_killed(sandbox_backend: SandboxBackend, make_code: object) -> None:
    """A 301 s sleep is killed at the (configured, here short) timeout, and nothing is left."""
    from calcgraph.workers.sandbox import SandboxSpec

    token = f"301.{uuid.uuid4().int % 10**9:09d}"
    # A child of the interpreter itself: a bwrap sandbox holds no host programs (no `sleep`).
    source = f"""
    import subprocess, sys, time
    def main():
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(301)", "{token}"],
            start_new_session=True,
        )
        time.sleep(301)
    """
    code_dir = make_code(job=source)  # type: ignore[operator]
    timeout = 3.0 if sandbox_backend.name != "docker" else 5.0
    sandbox = sandbox_backend.start(
        SandboxSpec(code_dir, "job:main", (), Limits(timeout_seconds=timeout))
    )
    began = time.monotonic()
    result = sandbox.run({})
    elapsed = time.monotonic() - began
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind == "timeout"
    assert timeout <= elapsed < timeout + 10
    assert not sandbox.alive
    assert _processes_with(token) == []
    assert sandbox.run({}).error.kind == "sandbox_error"  # type: ignore[union-attr]


# --- import-blacklist evasions ---------------------------------------------------------------

# Each gets `os` past a static import check, then tries what a static check meant to prevent.
EVASIONS = {
    "dunder-import": "os = __import__('o' + 's')",
    "importlib": "import importlib\nos = importlib.import_module(''.join(['o', 's']))",
    "sys-modules": "import sys\nos = sys.modules['o' + 's']",
    "subclass-walk": (
        "os = next(c for c in ().__class__.__base__.__subclasses__()"
        " if c.__name__ == '_wrap_close').__init__.__globals__['sys'].modules['os']"
    ),
    "ctypes": "import ctypes\nos = None\nlibc = ctypes.CDLL(None)",
}


@pytest.mark.parametrize("evasion", list(EVASIONS))
def test_import_blacklist_evasion(run: Runner, evasion: str) -> None:
    get_os = EVASIONS[evasion].replace("\n", "\n    ")
    source = f"""
def main():
    {get_os}
    done = []
    targets = ["/calcgraph-evasion", "/usr/calcgraph-evasion"]
    if os is None:  # ctypes: straight to libc
        for path in targets:
            libc.system(("touch " + path + " 2>/dev/null").encode())
        import os as real_os
        done = [p for p in targets if real_os.path.exists(p)]
        done += ["setuid"] if libc.setuid(0) == 0 else []
        return {{"done": done}}
    for path in targets:
        if os.system("touch " + path + " 2>/dev/null") == 0 and os.path.exists(path):
            done.append(path)
    try:
        os.setuid(0)
        done.append("setuid")
    except OSError:
        pass
    if os.environ.get("CALCGRAPH_DATABASE_URL") or os.path.exists("/var/run/docker.sock") and \\
            os.access("/var/run/docker.sock", os.R_OK):
        done.append("host-secrets")
    return {{"done": done}}
"""
    assert contained(run(source))["done"] == []


# --- output ----------------------------------------------------------------------------------


def test_output_is_capped(run: Runner, limits: Limits) -> None:
    source = """
    import sys
    def main():
        for _ in range(2000):
            print("y" * 1023)
            sys.stderr.write("z" * 1023 + "\\n")
        return {"done": True}
    """
    result = run(source)
    assert result.status == "success"
    assert len(result.logs.encode()) <= limits.output_bytes + 200
    assert "truncated" in result.logs or "dropped" in result.logs


def test_huge_result_is_refused(run: Runner) -> None:
    source = """
    def main():
        return {"blob": "x" * (17 << 20)}
    """
    result = run(source)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.kind == "user_error"
    assert "over the limit" in result.error.message
    assert 16 * MiB == Limits().result_bytes
