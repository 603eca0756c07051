"""The credentials file of `calcgraph login`: tokens by server URL, readable by its owner only.

{"default_url": "http://127.0.0.1:8000",
 "servers": {"http://127.0.0.1:8000": {"access_token": "...", "username": "alice", ...}}}
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class Credentials:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def default_url(self) -> str | None:
        url = self.load().get("default_url")
        return url if isinstance(url, str) else None

    def entry(self, url: str) -> dict[str, Any]:
        servers = self.load().get("servers")
        entry = servers.get(url.rstrip("/")) if isinstance(servers, dict) else None
        return entry if isinstance(entry, dict) else {}

    def token_for(self, url: str) -> str | None:
        entry = self.entry(url)
        token = entry.get("access_token")
        expires_at = entry.get("expires_at")
        if isinstance(expires_at, int | float) and expires_at < time.time():
            return None  # an expired token would only earn a 401; better to say "not signed in"
        return token if isinstance(token, str) else None

    def store(self, url: str, access_token: str, **details: Any) -> None:
        """Save a token for `url` and make `url` the default server, atomically, mode 0600."""
        url = url.rstrip("/")
        data = self.load()
        found = data.get("servers")
        servers: dict[str, Any] = found if isinstance(found, dict) else {}
        servers[url] = {"access_token": access_token, "saved_at": int(time.time()), **details}
        data.update(default_url=url, servers=servers)
        self._write(data)

    def forget(self, url: str) -> bool:
        data = self.load()
        servers = data.get("servers")
        if not isinstance(servers, dict) or servers.pop(url.rstrip("/"), None) is None:
            return False
        self._write(data)
        return True

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        # Created 0600 before any byte is written: the token is never readable by others.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            json.dump(data, file, indent=2)
        os.chmod(temporary, 0o600)
        os.replace(temporary, self.path)
