"""The jobs a worker process runs in a sandbox now, each with its sandbox once known, so a
cancel can kill it (`calcgraph.workers.cancel`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from calcgraph.workers.sandbox import Sandbox


class Watch:
    """One job running here: the sandbox it runs on, once known, and whether it was stopped."""

    def __init__(self, job_id: str, run_id: str | None) -> None:
        self.job_id = job_id
        self.run_id = run_id
        self.stopped = False
        self._sandbox: Sandbox | None = None
        self._lock = threading.Lock()

    def attach(self, sandbox: Sandbox) -> None:
        """The sandbox the job is about to run on; killed at once when already stopped."""
        with self._lock:
            self._sandbox = sandbox
            stopped = self.stopped
        if stopped:
            sandbox.close()

    def stop(self) -> None:
        with self._lock:
            self.stopped = True
            sandbox = self._sandbox
        if sandbox is not None:
            sandbox.close()


class Running:
    """The jobs this process runs in a sandbox now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: dict[str, Watch] = {}

    @contextlib.contextmanager
    def watching(self, job_id: str, run_id: str | None) -> Iterator[Watch]:
        watch = Watch(job_id, run_id)
        with self._lock:
            self._watches[job_id] = watch
        try:
            yield watch
        finally:
            with self._lock:
                if self._watches.get(job_id) is watch:
                    del self._watches[job_id]

    def snapshot(self) -> dict[str, str | None]:
        """job id -> run id (None outside a run) of every job running here."""
        with self._lock:
            return {job_id: w.run_id for job_id, w in self._watches.items()}

    def stop(self, job_ids: set[str]) -> int:
        """Kill the sandboxes of these jobs (those still running here); how many."""
        with self._lock:
            doomed = [w for job_id, w in self._watches.items() if job_id in job_ids]
        for watch in doomed:
            watch.stop()
        return len(doomed)
