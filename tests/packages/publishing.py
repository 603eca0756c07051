"""Publish requests for the tests: the bundled demo package, and small packages written here."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import httpx
import yaml

from calcgraph.demo import package_files

Bearer = Callable[..., dict[str, str]]

IO: dict[str, Any] = {
    "inputs": {"x": {"type": "Float", "description": "x", "required": True}},
    "outputs": {"y": {"type": "Float", "description": "y"}},
}


def demo_body(
    version: str | None = None,
    *,
    files: dict[str, str] | None = None,
    visibility: str | None = None,
    organization: str | None = None,
) -> dict[str, Any]:
    """The demo package as `POST /packages` carries it; `version` overrides package.version."""
    sources = package_files()
    manifest: dict[str, Any] = yaml.safe_load(sources.pop("calcgraph.yaml"))
    if version is not None:
        manifest["package"]["version"] = version
    if files:
        sources.update(files)
    body: dict[str, Any] = {"manifest": manifest, "files": sources}
    if visibility is not None:
        body["visibility"] = visibility
    if organization is not None:
        body["organization"] = organization
    return body


def small_body(
    name: str,
    version: str,
    *,
    code: str = "def run(x):\n    return {'y': x}\n",
    strategy: str = "auto",
    functions: dict[str, dict[str, Any]] | None = None,
    changelog: dict[str, Any] | None = None,
    visibility: str | None = None,
    organization: str | None = None,
) -> dict[str, Any]:
    """A one-module package `main.py` with a function `run` unless `functions` says else."""
    package: dict[str, Any] = {"name": name, "version": version, "versioning_strategy": strategy}
    if changelog is not None:
        package["changelog"] = changelog
    body: dict[str, Any] = {
        "manifest": {
            "kind": "package",
            "version": 1,
            "package": package,
            "functions": copy.deepcopy(functions)
            or {"run": {"handler": "main:run", **copy.deepcopy(IO)}},
        },
        "files": {"main.py": code},
    }
    if visibility is not None:
        body["visibility"] = visibility
    if organization is not None:
        body["organization"] = organization
    return body


async def publish(
    client: httpx.AsyncClient, headers: dict[str, str], body: dict[str, Any], status: int = 201
) -> dict[str, Any]:
    response = await client.post("/packages", json=body, headers=headers)
    assert response.status_code == status, response.text
    result: dict[str, Any] = response.json()
    return result


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in report["functions"]}
