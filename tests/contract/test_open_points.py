"""Issue 15: the contract's decided points, on both databases.

- Section 6: an inline struct may be JSON text in a string expression.
- Section 7: a manifest written by `yaml.safe_dump` (anchors and aliases) is read, through
  `POST /packages` and a Git deploy; an alias bomb is refused with 422.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from calcgraph.settings import Settings
from tests.packages.publishing import Bearer, publish

JSON_TEXT = '{"force": "Force", "arm": "Length"}'
PLAIN = "{force: Force, arm: Length}"
CODE = "def run(load):\n    return {'moment': load['force'] * load['arm']}\n"


def shared_io_manifest(name: str, load_type: object = JSON_TEXT) -> dict[str, Any]:
    """Two functions sharing one port dict: `yaml.safe_dump` writes it as anchor + alias."""
    ports = {
        "inputs": {"load": {"type": load_type, "description": "load", "required": True}},
        "outputs": {"moment": {"type": "Moment", "description": "moment"}},
    }
    return {
        "kind": "package",
        "version": 1,
        "package": {"name": name, "version": "1.0.0"},
        "functions": {
            "first": {"handler": "main:run", **ports},
            "second": {"handler": "main:run", **ports},
        },
    }


ALIAS_BOMB = "\n".join(
    ["kind: package", "version: 1", "package: {name: bomb, version: 1.0.0}", "functions: {}"]
    + ["x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 10)}]" for i in range(1, 9)]
)


class TestJsonTextStructs:
    @pytest.mark.parametrize(
        ("source", "target"),
        [(JSON_TEXT, PLAIN), (PLAIN, JSON_TEXT), (JSON_TEXT, JSON_TEXT)],
    )
    async def test_check_connection_reads_json_text(
        self, client: httpx.AsyncClient, source: str, target: str
    ) -> None:
        body = {"source": source, "target": target}
        response = await client.post("/types/check-connection", json=body)
        assert response.status_code == 200, response.text
        assert response.json()["compatibility"] == "ALLOWED"

    async def test_malformed_json_text_is_422(self, client: httpx.AsyncClient) -> None:
        body = {"source": '{"force": "Forse"}', "target": "Force"}
        response = await client.post("/types/check-connection", json=body)
        assert response.status_code == 422, response.text
        assert "did you mean 'Force'" in response.json()["detail"]

    async def test_ports_and_input_nodes_typed_as_json_text(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        body = {"manifest": shared_io_manifest("json-structs"), "files": {"main.py": CODE}}
        await publish(client, alice, body)
        graph = {
            "nodes": [
                {"node_key": "load", "kind": "input", "input_spec": {"type_expr": JSON_TEXT}},
                {
                    "node_key": "m",
                    "kind": "function",
                    "function": "json-structs/first",
                    "input_bindings": {
                        "load": {"source": "input_node", "input_key": "load", "from_port": "value"}
                    },
                },
            ]
        }
        created = await client.post(
            "/workflows", json={"slug": "json-structs", "name": "J", "graph": graph}, headers=alice
        )
        assert created.status_code == 201, created.text
        inputs = {"load": {"force": {"value": 12, "unit": "kN"}, "arm": 3}}
        run = await client.post(
            "/workflows/json-structs/runs", json={"inputs": inputs}, headers=alice
        )
        assert run.status_code == 201, run.text
        assert run.json()["inputs"] == inputs
        wrong = await client.post(
            "/workflows/json-structs/runs",
            json={"inputs": {"load": {"force": {"value": 12, "unit": "m"}, "arm": 3}}},
            headers=alice,
        )
        assert wrong.status_code == 422, wrong.text


class TestManifestAliases:
    async def test_safe_dump_output_with_aliases_publishes(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        text = yaml.safe_dump(shared_io_manifest("aliased"))
        assert "&id001" in text
        assert "*id001" in text
        body = {"manifest": text, "files": {"main.py": CODE}}
        report = await publish(client, bearer("alice"), body)
        assert {f["name"] for f in report["functions"]} == {"first", "second"}

    async def test_an_alias_bomb_is_422(self, client: httpx.AsyncClient, bearer: Bearer) -> None:
        body = {"manifest": ALIAS_BOMB, "files": {"main.py": CODE}}
        response = await client.post("/packages", json=body, headers=bearer("alice"))
        assert response.status_code == 422, response.text
        assert response.json()["detail"].startswith("ValidationError: ")
        assert "10000" in str(response.json()["errors"])


def _git(repo: Path, *args: str) -> None:
    run = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args]
    subprocess.run(run, cwd=repo, check=True, capture_output=True)


def _repository(path: Path, manifest: str) -> Path:
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    (path / "calcgraph.yaml").write_text(manifest)
    (path / "main.py").write_text(CODE)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "package")
    return path


@pytest.fixture
def settings(settings: Settings, tmp_path: Path) -> Settings:
    return settings.model_copy(update={"git_local_roots": [tmp_path]})


@pytest.mark.skipif(
    subprocess.run(["git", "--version"], capture_output=True).returncode != 0,
    reason="git is not installed",
)
async def test_git_deploys_of_aliased_manifests(
    client: httpx.AsyncClient, bearer: Bearer, tmp_path: Path
) -> None:
    alice = bearer("alice")
    good = _repository(tmp_path / "good", yaml.safe_dump(shared_io_manifest("git-aliased")))
    response = await client.post(
        "/packages/from-git", json={"git_url": good.as_uri(), "ref": "main"}, headers=alice
    )
    assert response.status_code == 201, response.text
    bomb = _repository(tmp_path / "bomb", ALIAS_BOMB)
    response = await client.post(
        "/packages/from-git", json={"git_url": bomb.as_uri(), "ref": "main"}, headers=alice
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("ValidationError: ")
