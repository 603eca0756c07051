"""Issue 27, point 2 (contract 8b): `calcgraph admin usage` and `Client.usage()` show admins what
every user holds beside the per-user limits; any other user gets PermissionDenied (403)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calcgraph.cli import main
from calcgraph.client import Client
from calcgraph.client.errors import PermissionDenied
from tests.client.conftest import Served, unique
from tests.client.packages import tools_package
from tests.client.test_cli import Cli, cli  # noqa: F401


def _admin(served: Served, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    token = served.token("admin", ("admin", "user"))
    capsys.readouterr()
    code = main(["--url", served.url, "--token", token, "admin", "usage", *argv])
    return code, capsys.readouterr().out


def test_admin_sees_alice_and_bob_beside_the_limits(
    cli: Cli,  # noqa: F811
    served: Served,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    for user in ("alice", "bob"):
        (tmp_path / user).mkdir()
        name, directory = tools_package(tmp_path / user)
        assert cli("packages", "publish", str(directory), user=user)[0] == 0
        code, _, err = cli(
            "functions", "execute", f"{name}/scale", "-i", "length=1 m", "-i", "factor=2", user=user
        )
        assert code == 0, err
    # bob owns a three-node workflow: his largest workflow version has 3 nodes.
    graph = {
        "nodes": [
            {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
            {"node_key": "len", "kind": "input", "input_spec": {"type_expr": "Length"}},
            {
                "node_key": "s",
                "kind": "function",
                "function": f"{name}/scale",
                "input_bindings": {
                    "length": {"source": "input_node", "input_key": "len", "from_port": "value"},
                    "factor": {"source": "input_node", "input_key": "x", "from_port": "value"},
                },
            },
        ]
    }
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps({"slug": unique("usage"), "name": "Usage", "graph": graph}))
    code, _, err = cli("workflows", "create", str(path), user="bob")
    assert code == 0, err
    code, out = _admin(served, capsys, "--json")
    assert code == 0, out
    report = json.loads(out)
    rows = {row["username"]: row for row in report["items"]}
    assert {"alice", "bob"} <= set(rows)
    assert rows["bob"]["jobs"] >= 1
    assert rows["bob"]["stored_bytes"] > 0
    assert rows["bob"]["largest_workflow_nodes"] == 3
    assert report["limits"] == {
        "runs": served.settings.limit_runs_per_user,
        "nodes": served.settings.limit_nodes_per_workflow,
        "queued_jobs": served.settings.limit_queued_jobs_per_user,
        "stored_bytes": served.settings.limit_stored_bytes_per_user,
    }
    code, table = _admin(served, capsys)
    assert code == 0
    assert "alice" in table
    assert "bob" in table
    assert f"limit {served.settings.limit_runs_per_user}" in table


def test_a_user_may_not(cli: Cli, served: Served) -> None:  # noqa: F811
    code, out, err = cli("admin", "usage", user="alice")
    assert code == 4, (out, err)
    assert "PermissionDenied" in err
    assert out == ""
    with Client(served.url, token=served.token("alice")) as client, pytest.raises(PermissionDenied):
        client.usage()


def test_no_token_is_unauthenticated(cli: Cli) -> None:  # noqa: F811
    code, _, err = cli("admin", "usage", user=None)
    assert code == 3, err
