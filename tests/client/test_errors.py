"""Each error kind of the contract, triggered for real, arrives as its own exception class
with status, kind, detail and (where the contract says) errors, report, retry_after."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from calcgraph.client import (
    CalcgraphError,
    Client,
    Conflict,
    ConnectionError,
    InvalidRequest,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    Unauthenticated,
    ValidationError,
)
from calcgraph.client.errors import error_from_response
from calcgraph.client.operations import Call
from tests.auth.idp import LocalIdentityProvider
from tests.client.conftest import DemoCopy, Served, exec_url, free_port, serve, unique  # noqa: F401
from tests.client.packages import tools_package


@pytest.fixture
def alice(served: Served) -> Iterator[Client]:
    with Client(served.url, served.token("alice")) as client:
        yield client


@pytest.fixture
def tools(alice: Client, tmp_path: Path) -> str:
    name, directory = tools_package(tmp_path)
    alice.publish_directory(directory)
    return name


def test_unauthenticated(served: Served) -> None:
    for token in (None, "not-a-jwt"):
        with Client(served.url, token) as client, pytest.raises(Unauthenticated) as caught:
            client.list_packages()
        error = caught.value
        assert (error.status, error.kind) == (401, "Unauthenticated")
        assert error.detail.startswith("Unauthenticated: ")
        assert error.message == error.detail.removeprefix("Unauthenticated: ")


def test_permission_denied(served: Served, alice: Client, tools: str) -> None:
    package = next(p for p in alice.iterate(alice.list_packages) if p.name == tools)
    with Client(served.url, served.token("bob")) as bob:
        with pytest.raises(PermissionDenied) as caught:
            bob.get_package(package.id)
        # Listings hide what the caller cannot see instead of refusing.
        assert tools not in {p.name for p in bob.iterate(bob.list_packages)}
    assert caught.value.status == 403


def test_not_found(alice: Client, tools: str) -> None:
    for attempt in (
        lambda: alice.get_run("no-such-run"),
        lambda: alice.get_workflow(unique("missing")),
        lambda: alice.execute(f"{tools}/scale@9.9.9", {}),
        lambda: alice.execute(f"{tools}/nothing", {}),
    ):
        with pytest.raises(NotFound) as caught:
            attempt()
        assert caught.value.status == 404
        assert caught.value.detail.startswith("NotFound: ")


def test_conflict(alice: Client, demo: DemoCopy) -> None:
    alice.publish_directory(demo.directory)
    slug = unique("dup")
    alice.create_workflow(slug, "one", demo.graph)
    with pytest.raises(Conflict) as caught:
        alice.create_workflow(slug, "two", demo.graph)
    assert caught.value.status == 409


def test_validation_error_lists_each_problem(alice: Client, tools: str) -> None:
    with pytest.raises(ValidationError) as caught:
        alice.execute(f"{tools}/scale", {"length": "long", "factor": {"value": 2, "unit": "kN"}})
    error = caught.value
    assert error.status == 422
    locs = [tuple(item["loc"]) for item in error.errors]
    assert any("length" in loc for loc in locs), locs
    assert all(item["msg"] for item in error.errors)


def test_invalid_graph_carries_the_report(alice: Client, tools: str) -> None:
    graph = {
        "nodes": [
            {
                "node_key": "a",
                "kind": "function",
                "function": f"{tools}/scale",
                "input_bindings": {
                    "length": {"source": "edge", "from_node_key": "b", "from_port": "scaled"},
                    "factor": {"source": "edge", "from_node_key": "b", "from_port": "scaled"},
                },
            },
            {
                "node_key": "b",
                "kind": "function",
                "function": f"{tools}/scale",
                "input_bindings": {
                    "length": {"source": "edge", "from_node_key": "a", "from_port": "scaled"},
                    "factor": {"source": "edge", "from_node_key": "a", "from_port": "scaled"},
                },
            },
        ]
    }
    with pytest.raises(ValidationError) as caught:
        alice.validate_workflow(graph)
    assert caught.value.report is not None
    assert caught.value.report["cycles"]


def test_untyped_function_node_is_an_invalid_request(alice: Client, tools: str) -> None:
    graph = {"nodes": [{"node_key": "u", "kind": "function", "function": f"{tools}/untyped"}]}
    with pytest.raises(InvalidRequest) as caught:
        alice.create_workflow(unique("untyped"), "untyped", graph)
    error = caught.value
    assert error.status == 400
    assert error.report is not None
    assert [e["node_key"] for e in error.report["untyped_functions"]] == ["u"]


def test_payload_too_large(alice: Client, tmp_path: Path) -> None:
    name, directory = tools_package(tmp_path)
    files = {"tools.py": (directory / "tools.py").read_text(), "big.py": "#" * (3 * 1024 * 1024)}
    with pytest.raises(PayloadTooLarge) as caught:
        alice.publish_package((directory / "calcgraph.yaml").read_text(), files)
    assert caught.value.status == 413


def test_method_not_allowed(alice: Client) -> None:
    with pytest.raises(MethodNotAllowed) as caught:
        alice.send(Call("DELETE", "/workflow-runs/some-run", dict))
    assert caught.value.status == 405


def test_not_acceptable(served: Served) -> None:
    headers = {"Accept": "application/vnd.service.v2+json"}
    response = httpx.get(f"{served.url}/types", headers=headers)
    error = error_from_response(response)
    assert isinstance(error, NotAcceptable)
    assert error.status == 406


def test_unreachable_server() -> None:
    with Client(f"http://127.0.0.1:{free_port()}", "t") as client:
        with pytest.raises(ConnectionError) as caught:
            client.health()
    assert caught.value.status is None
    assert isinstance(caught.value, CalcgraphError)
    assert "cannot reach calcgraph" in caught.value.detail


def test_rate_limited_says_when_to_retry(
    exec_url: str,  # noqa: F811
    identity_provider: LocalIdentityProvider,
    tmp_path: Path,
) -> None:
    with serve(
        exec_url, identity_provider, tmp_path, rate_limit_per_minute=1, rate_limit_burst=1
    ) as limited:
        # retries=0: the refusal itself, as a caller that does not retry sees it.
        with Client(limited.url, limited.token("rita"), retries=0) as client:
            client.list_packages()
            with pytest.raises(RateLimited) as caught:
                client.list_packages()
    error = caught.value
    assert error.status == 429
    assert error.retry_after is not None
    assert error.retry_after >= 1


def test_a_body_without_a_known_kind_falls_back_on_the_status() -> None:
    request = httpx.Request("GET", "http://x/")
    proxy = httpx.Response(502, text="<html>bad gateway</html>", request=request)
    error = error_from_response(proxy)
    assert error.status == 502
    assert error.kind == "InternalError"
    assert "bad gateway" in error.detail
    odd = httpx.Response(418, json={"detail": "I am a teapot"}, request=request)
    assert type(error_from_response(odd)) is CalcgraphError
