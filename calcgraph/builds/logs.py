"""Build logs: collected while a build runs, stored under the build's id in the build dir."""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

_KEY = re.compile(r"^logs/[0-9a-f-]{36}\.log$")
MAX_LOG_BYTES = 1024 * 1024


class BuildLog:
    """Lines with their time since the build started; thread-safe (pip runs in a thread)."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        stamp = f"[{time.monotonic() - self._started:7.2f}s] "
        with self._lock:
            self._lines.extend(stamp + line for line in text.rstrip("\n").splitlines() or [""])

    def text(self) -> str:
        with self._lock:
            body = "\n".join(self._lines) + "\n"
        # Keep the end: a failing build says why in its last lines.
        return body if len(body) <= MAX_LOG_BYTES else "[...]\n" + body[-MAX_LOG_BYTES:]


def log_key(build_id: str) -> str:
    return f"logs/{build_id}.log"


def store_log(build_dir: Path, build_id: str, text: str) -> str:
    """Write the log atomically and answer its storage key (relative to `build_dir`)."""
    key = log_key(build_id)
    path = build_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return key


def read_log(build_dir: Path, key: str) -> str | None:
    # Keys come from our own rows, but a key is a path: never follow one we did not make.
    if not _KEY.match(key):
        return None
    try:
        return (build_dir / key).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
