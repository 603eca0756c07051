"""Every Docker SDK client of calcgraph (the docker sandbox, the docker builder, build
retention), built in one place.

The SDK opens a unix socket per connection and, when the engine refuses it (no socket file, a
socket nobody listens on), does not close it: the socket stays open, held by the exception's
traceback, until the garbage collector frees it at some later, unrelated moment with a
`ResourceWarning` (under pytest's unraisable-exception check it failed whichever test came
next). A unix engine is therefore tried first through a socket of our own, closed whatever
happens; the SDK connects only to an engine that answered.
"""

from __future__ import annotations

import socket
from typing import Any

UNIX = "unix://"


class EngineUnreachable(Exception):
    """No Docker engine answers at the address; the message names it and why."""


def _probe_unix(base_url: str, timeout: float) -> None:
    path = base_url[len(UNIX) :]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(timeout)
        try:
            probe.connect(path)
        except FileNotFoundError:
            raise EngineUnreachable(
                f"no Docker engine answers at {base_url}: no such socket"
            ) from None
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            raise EngineUnreachable(f"no Docker engine answers at {base_url}: {why}") from None


def docker_client(base_url: str, timeout: float = 60.0) -> Any:
    """A `docker.DockerClient` of the engine at `base_url` (API version negotiated), or
    `EngineUnreachable`."""
    # The SDK (and requests under it) costs ~0.4 s to import: only code that talks to an
    # engine pays it, not every process start.
    import docker
    from docker.errors import DockerException

    if base_url.startswith(UNIX):
        _probe_unix(base_url, timeout)
    try:
        return docker.DockerClient(base_url=base_url, version="auto", timeout=int(timeout))
    except DockerException as exc:
        why = str(exc) or type(exc).__name__
    # Raised here, not in the except clause: the SDK's exception (and what its traceback
    # holds) is not carried along as this one's context.
    raise EngineUnreachable(f"no Docker engine answers at {base_url}: {why}")
