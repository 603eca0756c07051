"""Every Docker SDK client is built by `calcgraph.ops.docker_clients`: an engine that does not
answer is `EngineUnreachable`, naming the address and why, and leaves no socket open for the
garbage collector to complain about later (under pytest's unraisable-exception check, that
warning failed whichever test came next: after the docker builder's tests on a machine without
Docker, the next client test)."""

from __future__ import annotations

import gc
import socket
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from calcgraph.builds.docker_builder import docker_client as build_client
from calcgraph.builds.pip import BuildFailed
from calcgraph.ops.docker_clients import EngineUnreachable, docker_client


@pytest.fixture
def dead_engine(tmp_path: Path) -> Iterator[str]:
    """A socket file nobody listens on: every connection is refused."""
    path = tmp_path / "docker.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))
        yield f"unix://{path}"


def _resource_warnings(call: object) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        assert callable(call)
        call()
        gc.collect()
    return [str(w.message) for w in seen if w.category is ResourceWarning]


def test_a_refusing_engine_is_unreachable_and_leaks_no_socket(dead_engine: str) -> None:
    def refused() -> None:
        with pytest.raises(EngineUnreachable, match=f"no Docker engine answers at {dead_engine}"):
            docker_client(dead_engine, timeout=5)

    assert _resource_warnings(refused) == []


def test_no_socket_file_is_unreachable_and_leaks_no_socket(tmp_path: Path) -> None:
    missing = f"unix://{tmp_path / 'none.sock'}"

    def refused() -> None:
        with pytest.raises(EngineUnreachable, match="no such socket"):
            docker_client(missing, timeout=5)

    assert _resource_warnings(refused) == []


def test_the_builder_says_so_as_a_failed_build(dead_engine: str) -> None:
    def refused() -> None:
        with pytest.raises(BuildFailed, match="no Docker engine answers"):
            build_client(dead_engine, timeout=5)

    assert _resource_warnings(refused) == []
