"""The escape battery, part 3: tenants (issue 12). Loopback services, unix and abstract sockets,
other functions' code, the database file, the host's shared folders and environment, the result
channel, and other users' warm state. Every attempt must be contained on every backend.

The `process` backend gets its network and mount namespaces and a uid of its own only as root:
as another user, those attempts skip with that reason (it is for a single trusted user).
"""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from calcgraph.db.dialect import private_sqlite_file
from calcgraph.workers.sandbox import Limits, RunRequest, SandboxBackend, WarmPool
from tests.sandbox.conftest import CodeFactory, Runner, contained


def needs_root_process(backend: SandboxBackend, why: str = "namespaces and own uid") -> None:
    if backend.name == "process" and os.geteuid() != 0:
        pytest.skip(f"the process backend as a non-root user has no {why}")


# --- loopback and local sockets --------------------------------------------------------------

CONNECT = """
import socket
def main(family, address):
    family = {"inet": socket.AF_INET, "inet6": socket.AF_INET6, "unix": socket.AF_UNIX}[family]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(2)
    target = tuple(address) if isinstance(address, list) else address
    if isinstance(target, str) and target.startswith("@"):
        target = "\\0" + target[1:]
    try:
        sock.connect(target)
        return {"escaped": True}
    except OSError as exc:
        return {"escaped": False, "error": repr(exc)}
    finally:
        sock.close()
"""


@pytest.fixture(scope="module")
def listeners() -> Iterator[dict[str, Any]]:
    """Live services of the worker's host a job must not reach: TCP on loopback and on the
    host's own address, IPv6 loopback, an abstract unix socket."""
    opened: list[socket.socket] = []

    def listen(family: int, address: Any) -> Any:
        server = socket.socket(family, socket.SOCK_STREAM)
        server.bind(address)
        server.listen(8)
        opened.append(server)
        return server.getsockname()

    found: dict[str, Any] = {"tcp": listen(socket.AF_INET, ("127.0.0.1", 0))[1]}
    found["any"] = listen(socket.AF_INET, ("0.0.0.0", 0))[1]
    try:
        found["tcp6"] = listen(socket.AF_INET6, ("::1", 0))[1]
    except OSError:
        found["tcp6"] = None
    name = f"calcgraph-escape-{uuid.uuid4().hex[:8]}"
    listen(socket.AF_UNIX, "\0" + name)
    found["abstract"] = "@" + name
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: picks the outgoing address
            found["host_ip"] = probe.getsockname()[0]
    except OSError:
        found["host_ip"] = None
    yield found
    for server in opened:
        server.close()


TARGETS = {
    "api-listener": ("inet", lambda s: ["127.0.0.1", s["tcp"]]),
    "api-default-port": ("inet", lambda s: ["127.0.0.1", 8000]),
    "redis": ("inet", lambda s: ["127.0.0.1", 6379]),
    "postgresql": ("inet", lambda s: ["127.0.0.1", 5432]),
    "postgresql-localhost-alias": ("inet", lambda s: ["127.0.1.1", 5432]),
    "docker-tcp": ("inet", lambda s: ["127.0.0.1", 2375]),
    "wildcard-listener-via-host-ip": ("inet", lambda s: [s["host_ip"], s["any"]]),
    "ipv6-loopback": ("inet6", lambda s: ["::1", s["tcp6"]]),
    "abstract-unix-socket": ("unix", lambda s: s["abstract"]),
    "postgresql-unix-socket": ("unix", lambda s: "/run/postgresql/.s.PGSQL.5432"),
    "redis-unix-socket": ("unix", lambda s: "/run/redis/redis-server.sock"),
    "docker-unix-socket": ("unix", lambda s: "/run/docker.sock"),
}


@pytest.mark.parametrize("target", list(TARGETS))
def test_reach_host_service(
    sandbox_backend: SandboxBackend, run: Runner, listeners: dict[str, Any], target: str
) -> None:
    needs_root_process(sandbox_backend)
    family, address = TARGETS[target]
    resolved = address(listeners)
    if None in (resolved if isinstance(resolved, list) else [resolved]):
        pytest.skip(f"this machine has no {target} to aim at")
    assert contained(run(CONNECT, {"family": family, "address": resolved}))["escaped"] is False


# --- files of the worker ---------------------------------------------------------------------

READ = """
import os
def main(path):
    try:
        if os.path.isdir(path):
            return {"escaped": True, "listing": os.listdir(path)}
        with open(path, "rb") as handle:
            return {"escaped": True, "size": len(handle.read())}
    except OSError as exc:
        return {"escaped": False, "error": repr(exc)}
"""


@pytest.fixture(scope="module")
def worker_files() -> Iterator[dict[str, str]]:
    """A database file and a code cache entry as the worker creates them, under the shared
    temp directory."""
    from calcgraph.workers.code_cache import CodeCache

    base = Path(tempfile.mkdtemp(prefix="calcgraph-escape-files-"))
    base.chmod(0o755)  # the folder itself is no protection: the files must be
    database = base / "calcgraph.db"
    private_sqlite_file(f"sqlite+aiosqlite:///{database}")
    database.write_bytes(b"SQLite format 3\0 every user's inputs")
    cache = CodeCache(base / "code-cache")
    import hashlib

    secret = b"SECRET = 'another users code'\n"
    digest = hashlib.sha256(secret).hexdigest()
    code_dir = cache.stage({"secret.py": digest}, lambda _: {digest: secret})
    yield {
        "sqlite-file": str(database),
        "code-cache-root": str(cache.root),
        "code-cache-entry": str(code_dir),
        "code-cache-file": str(code_dir / "secret.py"),
        "worker-default-code-cache": str(CodeCache().root),
    }
    import shutil

    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(
    "what",
    [
        "sqlite-file",
        "code-cache-root",
        "code-cache-entry",
        "code-cache-file",
        "worker-default-code-cache",
    ],
)
def test_read_worker_files(
    sandbox_backend: SandboxBackend, run: Runner, worker_files: dict[str, str], what: str
) -> None:
    needs_root_process(sandbox_backend, "uid of its own")
    assert contained(run(READ, {"path": worker_files[what]}))["escaped"] is False


def test_read_another_sandboxs_staged_code(
    sandbox_backend: SandboxBackend, run: Runner, make_code: CodeFactory, limits: Limits
) -> None:
    needs_root_process(sandbox_backend, "uid of its own")
    other = make_code(secret="SECRET = 'other function'\ndef main():\n    return {}\n")
    sandbox = sandbox_backend.start(RunRequest(other, "secret:main", {}, (), limits).spec)
    try:
        path = str(sandbox.details.get("code_dir", other))  # type: ignore[attr-defined]
        assert contained(run(READ, {"path": path + "/secret.py"}))["escaped"] is False
        assert contained(run(READ, {"path": path}))["escaped"] is False
    finally:
        sandbox.close()


PARENT = """
import os
def main(what):
    pid = os.getppid()
    path = {"environ": f"/proc/{pid}/environ", "cwd": f"/proc/{pid}/cwd",
            "mem": f"/proc/{pid}/mem", "root": f"/proc/{pid}/root/etc/shadow"}[what]
    try:
        if what == "cwd":
            # The worker runs from the repository; the sandbox's own init from its own root.
            listing = os.listdir(path)
            return {"escaped": "pyproject.toml" in listing or "calcgraph" in listing}
        with open(path, "rb") as handle:
            data = handle.read(64)
        # Inside its own pid namespace the parent may be the sandbox's own init: harmless.
        return {"escaped": b"calcgraph" in data.lower() or what in ("mem", "root"),
                "size": len(data)}
    except OSError as exc:
        return {"escaped": False, "error": repr(exc)}
"""


@pytest.mark.parametrize("what", ["environ", "cwd", "mem", "root"])
def test_read_the_worker_through_proc(
    sandbox_backend: SandboxBackend, run: Runner, what: str
) -> None:
    needs_root_process(sandbox_backend, "uid of its own")
    assert contained(run(PARENT, {"what": what}))["escaped"] is False


def test_proc_1_environ_is_empty_of_the_host(
    sandbox_backend: SandboxBackend, run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs_root_process(sandbox_backend, "uid of its own")
    monkeypatch.setenv("CALCGRAPH_ESCAPE_MARK", "hostsecret")
    source = """
    def main():
        try:
            data = open("/proc/1/environ", "rb").read()
        except OSError as exc:
            return {"escaped": False, "error": repr(exc)}
        return {"escaped": b"hostsecret" in data or b"/work" in data or b"/root" in data}
    """
    assert contained(run(source))["escaped"] is False


@pytest.mark.parametrize("folder", ["/var/tmp", "/dev/shm", "/run"])
def test_write_host_shared_folder(
    sandbox_backend: SandboxBackend, run: Runner, folder: str
) -> None:
    needs_root_process(sandbox_backend)
    name = f"{folder}/calcgraph-escape-{uuid.uuid4().hex}"
    source = """
    def main(path):
        try:
            open(path, "w").write("escaped")
            return {"escaped": True}
        except OSError as exc:
            return {"escaped": False, "error": repr(exc)}
    """
    outputs = contained(run(source, {"path": name}))
    assert not os.path.exists(name)
    if sandbox_backend.name == "process":  # its /run is an empty read-only mount as well
        assert outputs["escaped"] is False


# --- the result channel ----------------------------------------------------------------------

FORGE = """
import json, os, subprocess, sys, threading, time
FAKE = [json.dumps({"type": "result", "status": "success", "outputs": {"y": "forged"},
                    "logs": "", **extra}) + "\\n"
        for extra in ({}, {"nonce": "0" * 32}, {"nonce": None})]
FAKE = "".join(FAKE).encode()

def spray():
    for fd in range(0, 256):
        try:
            os.write(fd, FAKE)
        except OSError:
            pass

def stolen_nonce():
    frame = sys._getframe()
    while frame is not None:
        for value in frame.f_locals.values():
            if isinstance(value, dict) and isinstance(value.get("nonce"), str):
                return value["nonce"]
        frame = frame.f_back
    return None

MODE = os.environ.get("X", "")

def main(x, how=""):
    if how == "every-fd":
        spray()
    elif how == "proc-fd":
        for fd in os.listdir("/proc/self/fd"):
            try:
                with open(f"/proc/self/fd/{fd}", "wb", buffering=0) as out:
                    out.write(FAKE)
            except OSError:
                pass
    elif how == "child-process":
        subprocess.run([sys.executable, "-c",
                        "import os\\nfor fd in range(256):\\n try: os.write(fd, %r)\\n"
                        " except OSError: pass" % FAKE], check=False)
    elif how == "later-thread":
        threading.Thread(target=lambda: [time.sleep(0.05) or spray() for _ in range(30)],
                         daemon=True).start()
    elif how == "stolen-nonce-for-later":
        nonce = stolen_nonce()
        line = json.dumps({"type": "result", "status": "success", "outputs": {"y": "forged"},
                           "nonce": nonce, "logs": ""}) + "\\n"
        def later():
            time.sleep(0.3)
            for fd in range(3, 64):
                try:
                    os.write(fd, line.encode())
                except OSError:
                    pass
        threading.Thread(target=later, daemon=True).start()
    elif how == "stdout":
        sys.stdout.write(FAKE.decode())
        sys.stdout.flush()
    elif how == "close-stdout":
        os.close(1)
        os.close(2)
    return {"y": x}
"""

FORGERIES = ["every-fd", "proc-fd", "child-process", "later-thread", "stolen-nonce-for-later",
             "stdout", "close-stdout"]  # fmt: skip


@pytest.mark.parametrize("how", FORGERIES)
def test_forge_results(
    sandbox_backend: SandboxBackend, make_code: CodeFactory, limits: Limits, how: str
) -> None:
    code_dir = make_code(job=FORGE)
    pool = WarmPool(sandbox_backend, max_size=4)
    try:
        first = pool.run("fv", RunRequest(code_dir, "job:main", {"x": "a", "how": how}, (),
                                          limits, tenant="mallory"))  # fmt: skip
        later = [
            pool.run(
                "fv", RunRequest(code_dir, "job:main", {"x": f"b{i}"}, (), limits, tenant="mallory")
            )  # fmt: skip
            for i in range(3)
        ]
    finally:
        pool.close()
    assert first.outputs == {"y": "a"}, first
    assert [r.outputs for r in later] == [{"y": f"b{i}"} for i in range(3)], later


# --- other users' warm state -----------------------------------------------------------------

WARM = """
import builtins, glob, json, os, subprocess, sys, threading, time
PLANTED = []

def main(role, how, token):
    MARK = "mallory-was-here-" + token
    if role == "plant":
        if how == "globals":
            PLANTED.append(MARK)
        elif how == "tmp":
            open("/tmp/" + MARK, "w").write("x")
        elif how == "tempdir":
            import tempfile
            open(os.path.join(tempfile.gettempdir(), MARK), "w").write("x")
        elif how == "environment":
            os.environ["MALLORY"] = MARK
        elif how == "builtins":
            builtins.MALLORY = MARK
        elif how == "patched-json":
            original = json.dumps
            json.dumps = lambda obj, *a, **k: original(
                {**obj, "outputs": {"seen": True}} if isinstance(obj, dict) and "outputs" in obj
                else obj, *a, **k)
        elif how == "thread":
            def watch():
                while True:
                    time.sleep(0.01)
                    builtins.WATCHED = getattr(builtins, "LAST_INPUT", None)
            threading.Thread(target=watch, daemon=True).start()
        elif how == "child-process":
            subprocess.Popen([sys.executable, "-c",
                              "import time, os, tempfile\\n"
                              "time.sleep(0.5)\\n"
                              f"open(os.path.join(tempfile.gettempdir(), {MARK!r}), 'w')"
                              ".write('x')\\ntime.sleep(30)"])
            time.sleep(0.1)
        elif how == "sys-modules":
            sys.modules["mallory_spy"] = type(sys)("mallory_spy")
        return {"seen": False}
    builtins.LAST_INPUT = "victim-input"
    time.sleep(0.8 if how == "child-process" else 0.05)
    import tempfile
    seen = bool(
        PLANTED
        or os.path.exists("/tmp/" + MARK)
        or os.path.exists(os.path.join(tempfile.gettempdir(), MARK))
        or os.environ.get("MALLORY")
        or getattr(builtins, "MALLORY", None)
        or getattr(builtins, "WATCHED", None)
        or "mallory_spy" in sys.modules
    )
    return {"seen": seen}
"""

WARM_ATTEMPTS = ["globals", "tmp", "tempdir", "environment", "builtins", "patched-json", "thread",
                 "child-process", "sys-modules"]  # fmt: skip


@pytest.mark.parametrize("how", WARM_ATTEMPTS)
def test_other_users_warm_state(
    sandbox_backend: SandboxBackend, make_code: CodeFactory, limits: Limits, how: str
) -> None:
    code_dir = make_code(job=WARM)
    pool = WarmPool(sandbox_backend, max_size=4)
    token = uuid.uuid4().hex

    def call(tenant: str, role: str) -> Any:
        inputs = {"role": role, "how": how, "token": token}
        return pool.run("fv", RunRequest(code_dir, "job:main", inputs, (), limits, tenant=tenant))

    try:
        planted = call("mallory", "plant")
        victim = call("victim", "probe")
    finally:
        pool.close()
    assert planted.status == "success", planted
    assert victim.outputs == {"seen": False}, victim
