"""calcgraph served by uvicorn in a subprocess on a free loopback port, on a throwaway SQLite."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from calcgraph.settings import Settings

HOST = "127.0.0.1"
_STARTUP_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Server:
    base_url: str
    command: str  # how it was started, for the report
    pid: int
    workers: int = 1

    def api_pids(self) -> list[int]:
        """The processes that answer requests: the server itself, or with several workers
        uvicorn's worker processes (the server is then their supervisor)."""
        if self.workers == 1:
            return [self.pid]
        return [pid for pid in children(self.pid) if _is_spawned_worker(pid)]


def children(pid: int) -> list[int]:
    """The direct children of process `pid`."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listed:
            return [int(child) for child in listed.read().split()]
    except OSError:
        return []


def _is_spawned_worker(pid: int) -> bool:
    """A worker process uvicorn spawned (not multiprocessing's resource tracker)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read()
    except OSError:
        return False
    return b"spawn_main" in argv


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server and its uvicorn worker processes: it leads a process group of its own."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=_STOP_TIMEOUT_S)


KEPT_LOGS = Path(__file__).resolve().parent / "results"


def _keep_if_failed(log_path: Path) -> None:
    """A server that logged an error or a traceback leaves its log in bench/results, named in
    the bench's output: a benchmark that saw a 500 must be explainable afterwards."""
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return
    if "Traceback" not in text and '"level": "error"' not in text:
        return
    KEPT_LOGS.mkdir(exist_ok=True)
    kept = KEPT_LOGS / f"server-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    kept.write_text(text)
    print(f"bench: the server logged errors; its log is kept in {kept}", file=sys.stderr)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextlib.contextmanager
def serve(workers: int = 1, extra_env: dict[str, str] | None = None) -> Iterator[Server]:
    """Run calcgraph on SQLite in a temp directory until the block exits (also on failure);
    `extra_env` adds or overrides settings (another database, the identity provider, the sandbox).

    One worker, or more with `CALCGRAPH_REDIS_URL` in `extra_env`, runs the product's own
    command, `calcgraph serve --workers N` (migrations, then uvicorn), as an operator would; more
    workers without Redis (which `calcgraph serve` refuses: each process would keep its own
    broker) run `calcgraph migrate` and then uvicorn's command line with the same factory, for
    the benchmarks that read no job.
    """
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="calcgraph-bench-") as tmp:
        log_path = Path(tmp) / "server.log"
        env = {
            **os.environ,
            "CALCGRAPH_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/bench.db",
            # No access log line per request: the benchmark measures the API, not the terminal.
            "CALCGRAPH_LOG_LEVEL": "warning",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
        python = sys.executable
        if workers == 1 or env.get("CALCGRAPH_REDIS_URL"):
            argv = [python, "-m", "calcgraph", "serve", "--host", HOST, "--port", str(port)]
            argv += ["--workers", str(workers)]
            command = f"calcgraph serve --workers {workers}"
        else:
            subprocess.run(
                [python, "-m", "calcgraph", "migrate"],
                env=env,
                check=True,
                capture_output=True,
                timeout=_STARTUP_TIMEOUT_S,
            )
            argv = [
                python,
                "-m",
                "uvicorn",
                "calcgraph.app:create_app",
                "--factory",
                "--host",
                HOST,
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--log-level",
                "warning",
                "--no-access-log",
                # What `calcgraph serve` runs: the contract's header limit and its keep-alive.
                "--http",
                "calcgraph.ops.header_limit:HeaderLimitProtocol",
                "--timeout-keep-alive",
                str(Settings.model_fields["http_keep_alive_seconds"].default),
            ]
            command = f"uvicorn --workers {workers}"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            base_url = f"http://{HOST}:{port}"
            _wait_healthy(process, base_url, log_path)
            yield Server(base_url=base_url, command=command, pid=process.pid, workers=workers)
        finally:
            _stop(process)
            _keep_if_failed(log_path)


def _wait_healthy(process: subprocess.Popen[bytes], base_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + _STARTUP_TIMEOUT_S
    with httpx.Client(base_url=base_url, timeout=2.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the server exited with {process.returncode}:\n{_tail(log_path)}"
                )
            try:
                if client.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    raise RuntimeError(f"the server did not answer /health in {_STARTUP_TIMEOUT_S:.0f} s")
