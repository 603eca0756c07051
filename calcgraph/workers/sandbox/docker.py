"""The `docker` backend (production): one container per warm sandbox, through the docker SDK.

The engine enforces every limit: network none, read-only root, a /tmp tmpfs of `tmp_bytes`,
memory (swap included), nano-CPUs, a pids limit, all capabilities dropped, no-new-privileges,
uid 65534, and its default seccomp profile (which refuses new user namespaces). The runner talks
over the container's attached stdin/stdout. Images are per function version; a missing image is
pulled with a deadline per registry, then from the fallback registry.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.types import Ulimit

from calcgraph.ops.docker_clients import EngineUnreachable, docker_client
from calcgraph.workers.sandbox.base import (
    SandboxBackend,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
    runner_config,
)
from calcgraph.workers.sandbox.cgroups import cpu_shares
from calcgraph.workers.sandbox.session import (
    Channel,
    ChannelClosed,
    RunnerSandbox,
    runner_source,
)
from calcgraph.workers.sandbox.staging import remove_staged, remove_stale_staging, stage_code

SANDBOX_GID = 65534
SANDBOX_USER = f"65534:{SANDBOX_GID}"
LABEL = "calcgraph.sandbox"
OWNER_LABEL = "calcgraph.sandbox.owner"
_STDOUT, _STDERR = 1, 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def with_registry(image: str, registry: str | None) -> str:
    """`image` as found on `registry` (replacing a registry host the reference already names)."""
    if not registry:
        return image
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        image = rest
    return f"{registry.rstrip('/')}/{image}"


class DockerChannel(Channel):
    """The attached stdin/stdout of a container: stdout arrives in 8-byte-header frames."""

    def __init__(self, sock: socket.socket, attached: Any) -> None:
        super().__init__()
        self._sock = sock
        self._attached = attached
        self._raw = bytearray()
        self._stderr = bytearray()
        self._selector = selectors.DefaultSelector()
        self._selector.register(sock, selectors.EVENT_READ)

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise ChannelClosed from exc

    def _frames(self) -> bytes:
        out = bytearray()
        while len(self._raw) >= 8:
            stream, size = struct.unpack(">BxxxL", self._raw[:8])
            if len(self._raw) < 8 + size:
                break
            payload = bytes(self._raw[8 : 8 + size])
            del self._raw[: 8 + size]
            if stream == _STDOUT:
                out += payload
            elif stream == _STDERR and len(self._stderr) < 65536:
                self._stderr += payload
        return bytes(out)

    def _read(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + timeout
        while True:
            data = self._frames()
            if data:
                return data
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                return None
            try:
                chunk = self._sock.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                return self._frames() or b""
            self._raw += chunk

    def diagnostics(self) -> str:
        return self._stderr.decode("utf-8", "replace").strip()

    def close(self) -> None:
        self.closed = True
        self._selector.close()
        # The SDK wraps the socket in a SocketIO (and an HTTP response) that hold references to
        # it: close them all, or the descriptor outlives the sandbox.
        response = getattr(self._attached, "_response", None)
        for closable in (self._attached, response, self._sock):
            with contextlib.suppress(Exception):
                if closable is not None:
                    closable.close()


class DockerBackend(SandboxBackend):
    name = "docker"

    def __init__(
        self,
        *,
        base_url: str = "unix:///var/run/docker.sock",
        base_image: str = "calcgraph/python-base",
        registry: str | None = None,
        fallback_registry: str | None = None,
        pull_timeout_seconds: float = 30.0,
        stage_dir: Path | None = None,
    ) -> None:
        self.base_url = base_url
        self.base_image = base_image
        self.registry = registry
        self.fallback_registry = fallback_registry
        self.pull_timeout_seconds = pull_timeout_seconds
        self.stage_dir = stage_dir
        try:
            self.client: Any = docker_client(base_url)
        except EngineUnreachable as exc:
            raise SandboxUnavailable(str(exc)) from None
        self.owner = f"{socket.gethostname()}:{os.getpid()}"
        self.remove_stale()
        remove_stale_staging(stage_dir)

    def remove_stale(self) -> None:
        """Remove sandboxes of workers of this host that died without removing them (a job may
        still run in one: the engine does not stop a container when its attach goes away)."""
        host = socket.gethostname()
        with contextlib.suppress(DockerException):
            for container in self.client.containers.list(all=True, filters={"label": LABEL}):
                owner_host, _, pid = str(container.labels.get(OWNER_LABEL, "")).rpartition(":")
                if owner_host == host and pid.isdigit() and not _alive(int(pid)):
                    with contextlib.suppress(DockerException):
                        container.remove(force=True)

    def mechanisms(self) -> dict[str, str | None]:
        try:
            info = self.client.info()
        except DockerException as exc:
            raise SandboxUnavailable(f"the Docker engine at {self.base_url} fails: {exc}") from exc
        seccomp = any("seccomp" in opt for opt in info.get("SecurityOptions") or [])
        return {
            "network": "network_mode=none",
            "read_only_fs": "read_only root filesystem; /tmp the only tmpfs",
            "tmp_size": "tmpfs /tmp size=",
            "memory": "mem_limit = memswap_limit (OOM kill)",
            "cpus": "nano_cpus",
            "cpu_priority": "cpu_shares",
            "pids": "pids_limit",
            "capabilities": "cap_drop ALL (CapEff verified 0 at start)",
            "no_new_privileges": "security_opt no-new-privileges (verified at start)",
            "non_root": f"user {SANDBOX_USER} (verified at start)",
            "user_namespaces": "the engine's default seccomp profile" if seccomp else None,
            "environment": "an environment of PATH, HOME, TMPDIR, LANG only",
            "timeout": "host kills and removes the container",
            "output": "captured in the runner, truncated",
        }

    # Images ---------------------------------------------------------------------------------

    def _pull(self, reference: str, timeout: float) -> None:
        """Pull within `timeout` seconds; a pull that hangs is abandoned in its thread."""
        errors: list[BaseException] = []

        def pull() -> None:
            try:
                client = docker.APIClient(base_url=self.base_url, version="auto", timeout=timeout)
                try:
                    repository, _, tag = reference.rpartition(":")
                    if not repository or "/" in tag:
                        repository, tag = reference, "latest"
                    client.pull(repository, tag=tag)
                finally:
                    client.close()
            except BaseException as exc:  # reported to the waiting caller
                errors.append(exc)

        thread = threading.Thread(target=pull, daemon=True, name=f"pull {reference}")
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"no answer within {timeout:g} s")
        if errors:
            raise errors[0]

    def ensure_image(self, image: str) -> None:
        """Make `image` present locally: as is, else from the registry, else the fallback."""
        try:
            self.client.images.get(image)
            return
        except ImageNotFound:
            pass
        except DockerException as exc:
            raise SandboxError("infrastructure_error", f"the Docker engine fails: {exc}") from exc
        registries: list[str | None] = [r for r in (self.registry, self.fallback_registry) if r]
        failures: list[str] = []
        for registry in registries or [None]:
            reference = with_registry(image, registry)
            try:
                self._pull(reference, self.pull_timeout_seconds)
                if reference != image:
                    self.client.images.get(reference).tag(image)
                return
            except Exception as exc:  # every registry failure is tried over, then reported
                failures.append(f"{reference}: {exc}")
        raise SandboxError(
            "infrastructure_error", f"cannot pull image {image}: " + "; ".join(failures)
        )

    # Sandboxes ------------------------------------------------------------------------------

    def start(self, spec: SandboxSpec) -> RunnerSandbox:
        self.fail_closed()
        limits = spec.limits
        image = spec.image or self.base_image
        self.ensure_image(image)
        staged = stage_code(spec.code_dir, self.stage_dir, gid=SANDBOX_GID)
        volumes = {str(staged / "code"): {"bind": "/code", "mode": "ro"}}
        if spec.deps_dir is not None:
            volumes[str(spec.deps_dir.resolve())] = {"bind": "/deps", "mode": "ro"}
        config = runner_config(
            spec,
            limits,
            code_dir="/code",
            deps_dir="/deps",
            rlimits={},
            cpu_affinity=None,
            no_new_privs=False,  # the engine has set it
            user=None,
            workdir="/tmp",
            kill_all=True,  # its own pid namespace: every process but the init is the job's
        )
        container: Any = None
        try:
            container = self.client.containers.create(
                image,
                command=["python3", "-I", "-B", "-c", runner_source()],
                stdin_open=True,
                tty=False,
                user=SANDBOX_USER,
                environment={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
                             "TMPDIR": "/tmp", "LANG": "C.UTF-8"},
                working_dir="/tmp",
                hostname="sandbox",
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmp_bytes},mode=1777"},
                mem_limit=limits.memory_bytes,
                memswap_limit=limits.memory_bytes,
                nano_cpus=int(limits.cpus * 1_000_000_000),
                cpu_shares=cpu_shares(limits.niceness),
                pids_limit=limits.pids,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                ulimits=[Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
                         Ulimit(name="core", soft=0, hard=0)],
                volumes=volumes,
                labels={LABEL: "1", OWNER_LABEL: self.owner},
                # An init as pid 1 reaps what the handler forks, and leaves the runner an
                # ordinary process that signals (and the OOM killer) end like anywhere else.
                init=True,
                # No /dev/shm: /tmp is the only writable place the specification allows.
                ipc_mode="none",
            )  # fmt: skip
            attached = self.client.api.attach_socket(
                container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            container.start()
        except DockerException as exc:
            if container is not None:
                with contextlib.suppress(DockerException):
                    container.remove(force=True)
            remove_staged(staged)
            raise SandboxError("infrastructure_error", f"cannot start a container: {exc}") from exc
        sock: socket.socket = getattr(attached, "_sock", attached)
        channel = DockerChannel(sock, attached)

        def kill() -> None:
            channel.close()
            with contextlib.suppress(NotFound, DockerException):
                container.remove(force=True)
            remove_staged(staged)

        def oom_killed() -> bool:
            with contextlib.suppress(DockerException):
                for _ in range(50):
                    container.reload()
                    state = container.attrs.get("State") or {}
                    if not state.get("Running"):
                        return bool(state.get("OOMKilled"))
                    time.sleep(0.02)
            return False

        sandbox = RunnerSandbox(
            spec,
            channel,
            config,
            kill=kill,
            oom_killed=oom_killed,
            details={
                "container_id": container.id,
                "image": image,
                "code_dir": str(staged / "code"),
            },
        )
        sandbox.handshake()
        return sandbox

    def close(self) -> None:
        with contextlib.suppress(DockerException):
            self.client.close()
