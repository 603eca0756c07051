"""The escape battery, part 1: network, filesystem, memory and processes. Every attempt must fail
on every backend this machine has (part 2: `test_escape_privileges.py`).

An attempt aimed at a limit that a backend documents as unenforceable (the `process` backend:
network, read-only filesystem, /tmp size, user namespaces) is skipped there with that reason;
everywhere else it must be contained.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from calcgraph.workers.sandbox import GiB, Limits, SandboxBackend
from tests.sandbox.conftest import Runner, contained, require

# --- network ---------------------------------------------------------------------------------

CONNECT = """
import socket
def main(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return {"escaped": True}
    except OSError as exc:
        return {"escaped": False, "error": repr(exc)}
"""


@pytest.mark.parametrize(
    ("host", "port"),
    [("1.1.1.1", 443), ("8.8.8.8", 53), ("169.254.169.254", 80)],
    ids=["public-https", "public-dns-tcp", "metadata-service"],
)
def test_outbound_connection(
    sandbox_backend: SandboxBackend, run: Runner, host: str, port: int
) -> None:
    require(sandbox_backend, "network")
    assert contained(run(CONNECT, {"host": host, "port": port}))["escaped"] is False


def test_udp_datagram_out(sandbox_backend: SandboxBackend, run: Runner) -> None:
    require(sandbox_backend, "network")
    source = """
    import socket
    def main():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        try:
            s.sendto(b"\\x00" * 12, ("8.8.8.8", 53))
            s.recvfrom(512)
            return {"escaped": True}
        except OSError as exc:
            return {"escaped": False, "error": repr(exc)}
    """
    assert contained(run(source))["escaped"] is False


def test_name_resolution(sandbox_backend: SandboxBackend, run: Runner) -> None:
    require(sandbox_backend, "network")
    source = """
    import socket
    def main():
        try:
            return {"escaped": True, "addr": socket.getaddrinfo("deb.debian.org", 80)[0][4][0]}
        except OSError as exc:
            return {"escaped": False, "error": repr(exc)}
    """
    assert contained(run(source))["escaped"] is False


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A service on the worker's loopback that a sandbox must not reach."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def test_host_loopback_service(
    sandbox_backend: SandboxBackend, run: Runner, host_listener: int
) -> None:
    require(sandbox_backend, "network")
    result = run(CONNECT, {"host": "127.0.0.1", "port": host_listener})
    assert contained(result)["escaped"] is False


def test_only_loopback_interface(sandbox_backend: SandboxBackend, run: Runner) -> None:
    require(sandbox_backend, "network")
    source = """
    import socket
    def main():
        return {"interfaces": [name for _, name in socket.if_nameindex()]}
    """
    assert set(contained(run(source))["interfaces"]) <= {"lo"}  # type: ignore[arg-type]


# --- filesystem ------------------------------------------------------------------------------

WRITE = """
import os
def main(path):
    try:
        with open(path, "w") as handle:
            handle.write("escaped")
        return {"escaped": True}
    except OSError as exc:
        return {"escaped": False, "error": repr(exc)}
"""


@pytest.mark.parametrize(
    "path",
    ["/calcgraph-escape", "/code/escape.py", "/usr/calcgraph-escape", "/etc/calcgraph-escape"],
    ids=["root", "code-dir", "usr", "etc"],
)
def test_write_outside_tmp(sandbox_backend: SandboxBackend, run: Runner, path: str) -> None:
    if path.startswith("/code"):
        # The process backend has no /code: its code lives in a staged directory.
        source = WRITE.replace("def main(path):", "def main(path):\n    path = __file__ + '.x'")
        assert contained(run(source, {"path": path}))["escaped"] is False
        return
    assert contained(run(WRITE, {"path": path}))["escaped"] is False
    assert not os.path.exists(path) or sandbox_backend.name == "docker"


def test_write_interpreter_prefix(sandbox_backend: SandboxBackend, run: Runner) -> None:
    source = WRITE.replace(
        "def main(path):", "def main(path):\n    import sys\n    path = sys.prefix + '/escape'"
    )
    assert contained(run(source, {"path": ""}))["escaped"] is False


@pytest.mark.parametrize("path", ["/var/tmp/calcgraph-escape", "/dev/shm/calcgraph-escape"])
def test_write_world_writable_dirs(sandbox_backend: SandboxBackend, run: Runner, path: str) -> None:
    require(sandbox_backend, "read_only_fs")
    assert contained(run(WRITE, {"path": path}))["escaped"] is False


FILL = """
import errno, os, tempfile
def main(files, megabytes):
    written, error = 0, None
    tmp = tempfile.gettempdir()  # /tmp, or the process backend's private directory
    block = b"x" * (1 << 20)
    try:
        for n in range(files):
            with open(f"{tmp}/fill{n}", "wb") as handle:
                for _ in range(megabytes):
                    handle.write(block)
                    written += 1
    except OSError as exc:
        error = errno.errorcode.get(exc.errno, str(exc.errno))
    return {"written_mib": written, "error": error}
"""


def test_fill_tmp_one_file(sandbox_backend: SandboxBackend, run: Runner) -> None:
    outputs = contained(run(FILL, {"files": 1, "megabytes": 600}))
    assert outputs["error"] in ("ENOSPC", "EFBIG")
    assert outputs["written_mib"] <= 512  # type: ignore[operator]


def test_fill_tmp_many_files(sandbox_backend: SandboxBackend, run: Runner) -> None:
    require(sandbox_backend, "tmp_size")
    outputs = contained(run(FILL, {"files": 3, "megabytes": 200}))
    assert outputs["error"] == "ENOSPC"
    assert outputs["written_mib"] <= 512  # type: ignore[operator]


# --- memory and processes --------------------------------------------------------------------


def test_allocate_past_memory_limit(run: Runner) -> None:
    source = """
    def main():
        hoard = []
        for _ in range(48):  # 3 GiB, every page written
            hoard.append(b"x" * (64 << 20))
        return {"escaped": True}
    """
    result = run(source)
    assert result.status == "failed", result
    assert result.error is not None
    assert result.error.kind == "out_of_memory"
    assert Limits().memory_bytes == 2 * GiB


def test_fork_bomb(run: Runner, limits: Limits) -> None:
    source = """
    import os, signal, time
    def main():
        children, error = [], None
        try:
            for _ in range(5000):
                pid = os.fork()
                if pid == 0:
                    time.sleep(60)
                    os._exit(0)
                children.append(pid)
        except OSError as exc:
            error = repr(exc)
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        for pid in children:
            os.waitpid(pid, 0)
        return {"forked": len(children), "error": error}
    """
    small = Limits(timeout_seconds=limits.timeout_seconds, pids=64)
    outputs = contained(run(source, limits_=small))
    assert outputs["error"] is not None
    assert outputs["forked"] < 64  # type: ignore[operator]
