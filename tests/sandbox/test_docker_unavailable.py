"""A Docker engine that does not answer makes the docker backend unavailable, with the reason,
and leaves no socket behind for the garbage collector to complain about later (under pytest's
unraisable-exception check, that warning failed whichever test came next)."""

from __future__ import annotations

import gc
import socket
import warnings
from pathlib import Path

import pytest

from calcgraph.workers.sandbox.base import SandboxUnavailable
from calcgraph.workers.sandbox.docker import DockerBackend


def test_an_engine_that_refuses_is_unavailable_and_leaks_no_socket(tmp_path: Path) -> None:
    path = tmp_path / "docker.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # a socket file nobody listens on: every connection is refused
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", ResourceWarning)
            with pytest.raises(SandboxUnavailable, match="no Docker engine answers at unix://"):
                DockerBackend(base_url=f"unix://{path}", base_image="calcgraph/python-base")
            gc.collect()
        assert [str(w.message) for w in seen if w.category is ResourceWarning] == []
    finally:
        dead.close()


def test_no_socket_file_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="no such socket"):
        DockerBackend(base_url=f"unix://{tmp_path / 'none.sock'}", base_image="x")
