"""The client commands of `calcgraph`, run through `calcgraph.cli.main` against a real server:
human and `--json` output, exit codes per error kind, and a run followed to completion."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from calcgraph.cli import main
from calcgraph.demo import DEMO_INPUTS
from tests.client.conftest import DemoCopy, Served, free_port, unique
from tests.client.packages import git_repository, tools_package

BEAM_INPUTS = ["length=3 m", "force=12 kN", "youngs_modulus=210 GPa", "second_moment=8.356e-5"]


class Cli:
    def __init__(self, served: Served, capsys: pytest.CaptureFixture[str]) -> None:
        self.served = served
        self.capsys = capsys

    def __call__(self, *argv: str, user: str | None = "alice") -> tuple[int, str, str]:
        auth = ["--token", self.served.token(user)] if user else []
        self.capsys.readouterr()
        code = main(["--url", self.served.url, *auth, *argv])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *argv: str, user: str | None = "alice") -> tuple[int, Any]:
        code, out, err = self(*argv, "--json", user=user)
        assert out.count("\n") == 1, (out, err)  # one JSON document
        return code, json.loads(out)


@pytest.fixture
def cli(served: Served, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(served, capsys)


def inputs_args(values: list[str]) -> list[str]:
    return [arg for value in values for arg in ("--input", value)]


def demo_inputs() -> list[str]:
    quantities = {
        "span": "3 m",
        "load": "12 kN",
        "youngs_modulus": "210 GPa",
        "second_moment": "8.356e-5",
        "section_modulus": "557 cm**3",
        "yield_stress": "355 MPa",
    }
    assert set(quantities) == set(DEMO_INPUTS)
    return inputs_args([f"{key}={value}" for key, value in quantities.items()])


class TestPackagesAndFunctions:
    def test_publish_human_then_json_then_conflict(self, cli: Cli, demo: DemoCopy) -> None:
        code, out, _ = cli("packages", "publish", str(demo.directory), "--visibility", "public")
        assert code == 0
        assert f"deployed {demo.name} 1.2.0" in out
        for function in ("cantilever", "stress_check", "deflection_check", "verdict"):
            assert function in out
        code, out, err = cli("packages", "publish", str(demo.directory))
        assert code == 6
        assert out == ""
        assert err.startswith("error: Conflict: ")
        assert "already exists" in err
        code, document = cli.json("packages", "publish", str(demo.directory))
        assert code == 6
        assert document["error"]["kind"] == "Conflict"
        assert document["error"]["status"] == 409
        code, listing = cli.json("packages", "list", "--limit", "500", user="bob")
        assert code == 0
        public = next(p for p in listing["items"] if p["name"] == demo.name)
        assert public["visibility"] == "public"

    def test_deploy_git(self, cli: Cli, tmp_path: Path) -> None:
        name, url = git_repository(tmp_path)
        code, out, _ = cli("packages", "deploy-git", url, "v1.0.0")
        assert code == 0
        assert f"deployed {name} 1.0.0" in out
        code, _, err = cli("packages", "deploy-git", url, "no-such-ref")
        assert code in (5, 7, 8)
        assert err.startswith("error: ")

    def test_execute_with_quantities(self, cli: Cli, tmp_path: Path) -> None:
        name, directory = tools_package(tmp_path)
        assert cli.json("packages", "publish", str(directory))[0] == 0
        code, out, _ = cli(
            "functions", "execute", f"{name}/scale@1.0.0", "-i", "length=250 mm", "-i", "factor=4"
        )
        assert code == 0
        assert "success" in out
        assert "scaled" in out
        code, result = cli.json(
            "functions",
            "execute",
            f"{name}/scale",
            "--input",
            "length=2.5 m",
            "--input",
            "factor=2",
        )
        assert code == 0
        assert result["status"] == "success"
        assert result["outputs"] == pytest.approx({"scaled": 5.0})
        code, job = cli.json("jobs", "show", result["job_id"])
        assert code == 0
        assert job["inputs"] == {"length": {"value": 2.5, "unit": "m"}, "factor": 2}
        code, listing = cli.json("functions", "list", "--limit", "500")
        assert f"{name}/scale" in {f"{f['package']}/{f['name']}" for f in listing["items"]}

    def test_execute_exit_codes(self, cli: Cli, tmp_path: Path) -> None:
        name, directory = tools_package(tmp_path)
        cli("packages", "publish", str(directory))
        code, out, err = cli("functions", "execute", f"{name}/boom", "-i", "x=1")
        assert code == 1
        assert "failed" in out
        assert "user_error" in out
        code, out, err = cli("functions", "execute", f"{name}/scale", "-i", "length=3 kN")
        assert code == 7
        assert err.startswith("error: ValidationError: ")
        assert "body.inputs.length" in err
        assert "body.inputs.factor" in err
        code, _, err = cli("functions", "execute", f"{name}/absent")
        assert code == 5
        assert err.startswith("error: NotFound: ")
        code, _, err = cli("functions", "execute", f"{name}/scale", "-i", "oops")
        assert code == 2
        assert "KEY=VALUE" in err

    def test_execute_waits_for_a_queued_job(self, cli: Cli, tmp_path: Path) -> None:
        name, directory = tools_package(tmp_path)
        cli("packages", "publish", str(directory))
        code, result = cli.json(
            "functions",
            "execute",
            f"{name}/scale",
            "-i",
            "length=1",
            "-i",
            "factor=3",
            "--wait",
            "0",
        )
        assert code == 0
        assert result["status"] in {"queued", "running", "success"}


class TestWorkflowsAndRuns:
    def test_create_start_follow_and_show(self, cli: Cli, demo: DemoCopy, tmp_path: Path) -> None:
        cli("packages", "publish", str(demo.directory))
        graph_file = tmp_path / "graph.json"
        graph_file.write_text(json.dumps(demo.graph))
        slug = unique("beam")
        code, out, _ = cli("workflows", "create", str(graph_file), "--slug", slug, "--name", "B")
        assert code == 0
        assert f"workflow {slug} (B) version 1" in out
        assert any(line.split()[1:4] == ["span", "│", "Length"] for line in out.splitlines()), out
        code, _, err = cli("workflows", "create", str(graph_file), "--slug", slug)
        assert code == 6
        assert "Conflict" in err

        code, out, err = cli("runs", "start", slug, *demo_inputs())
        assert code == 0, err
        lines = out.splitlines()
        assert any(" verdict " in line and "success" in line for line in lines), out
        assert "completed in" in out
        assert "verdict.verdict = PASS (stiffness governs)" in out

        code, run = cli.json("runs", "start", slug, *demo_inputs())
        assert code == 0
        assert run["status"] == "completed"
        assert run["terminal_outputs"]["verdict"]["verdict"] == "PASS (stiffness governs)"
        assert run["inputs"]["load"] == {"value": 12, "unit": "kN"}

        code, shown = cli.json("runs", "show", run["id"])
        assert code == 0
        assert shown == run
        code, out, _ = cli("runs", "show", run["id"])
        assert code == 0
        assert "beam" in out
        assert "completed" in out
        # A bad id, unknown or empty (a README loop whose start failed), is a NotFound (exit 5)
        # in one line; an empty one never reaches the list of runs it would otherwise name.
        for bad in ("no-such-run", ""):
            code, out, err = cli("runs", "show", bad)
            assert code == 5, err
            assert err.startswith("error: NotFound: "), err
            assert "Traceback" not in err
            assert "validation error" not in err
        code, listing = cli.json("runs", "list", "--workflow", slug, "--status", "completed")
        assert run["id"] in {r["id"] for r in listing["items"]}
        code, shown_workflow = cli.json("workflows", "show", slug)
        assert shown_workflow["slug"] == slug
        assert shown_workflow["version"] == 1

    def test_workflow_document_and_a_failed_run(self, cli: Cli, tmp_path: Path) -> None:
        name, directory = tools_package(tmp_path)
        cli("packages", "publish", str(directory))
        slug = unique("boom")
        document = {
            "slug": slug,
            "name": "Boom",
            "graph": {
                "nodes": [
                    {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
                    {
                        "node_key": "fails",
                        "kind": "function",
                        "function": f"{name}/boom",
                        "input_bindings": {
                            "x": {"source": "input_node", "input_key": "x", "from_port": "value"}
                        },
                    },
                ]
            },
        }
        path = tmp_path / "workflow.json"
        path.write_text(json.dumps(document))
        code, created = cli.json("workflows", "create", str(path))
        assert code == 0
        assert (created["slug"], created["name"]) == (slug, "Boom")
        code, out, _ = cli("runs", "start", slug, "-i", "x=2")
        assert code == 1
        assert "failed node: fails" in out
        code, run = cli.json("runs", "start", slug, "-i", "x=2")
        assert code == 1
        assert run["first_failed_node_key"] == "fails"

    def test_bad_workflow_file_is_a_usage_error(self, cli: Cli, tmp_path: Path) -> None:
        path = tmp_path / "broken.json"
        path.write_text("{nodes")
        code, _, err = cli("workflows", "create", str(path), "--slug", "x")
        assert code == 2
        assert "is not JSON" in err
        code, _, err = cli("workflows", "create", str(tmp_path / "absent.json"), "--slug", "x")
        assert code == 2
        assert err.startswith("error: ")


class TestGlobalOptionsAndExitCodes:
    def test_unauthenticated_and_unreachable(self, cli: Cli, served: Served) -> None:
        code, _, err = cli("packages", "list", user=None)
        assert code == 3
        assert err.startswith("error: Unauthenticated: ")
        code, _, err = cli("--url", f"http://127.0.0.1:{free_port()}", "packages", "list")
        assert code == 10
        assert "cannot reach calcgraph" in err

    def test_environment_supplies_url_and_token(
        self, served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("CALCGRAPH_URL", served.url)
        monkeypatch.setenv("CALCGRAPH_TOKEN", served.token("alice"))
        assert main(["workflows", "list", "--json"]) == 0
        assert "items" in json.loads(capsys.readouterr().out)

    def test_help_lists_the_exit_codes(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["--help"])
        assert exited.value.code == 0
        out = capsys.readouterr().out
        for line in ("3   Unauthenticated", "7   ValidationError", "10  server error"):
            assert line in out

    def test_missing_arguments_are_usage_errors(self, capsys: pytest.CaptureFixture[str]) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["runs", "start"])
        assert exited.value.code == 2


class TestLogin:
    def test_token_is_checked_then_stored_privately(
        self, served: Served, capsys: pytest.CaptureFixture[str], isolated_client_config: Path
    ) -> None:
        assert main(["--url", served.url, "login", "--token", "garbage"]) == 3
        assert not isolated_client_config.exists()
        token = served.token("alice")
        assert main(["--url", served.url, "login", "--token", token]) == 0
        assert "signed in to" in capsys.readouterr().out
        assert stat.S_IMODE(isolated_client_config.stat().st_mode) == 0o600
        stored = json.loads(isolated_client_config.read_text())
        assert stored["default_url"] == served.url
        assert stored["servers"][served.url]["access_token"] == token
        # No --url, no --token: both come from the credentials file.
        assert main(["--json", "workflows", "list"]) == 0
        assert "items" in json.loads(capsys.readouterr().out)
        assert main(["logout"]) == 0
        assert main(["packages", "list"]) == 3

    def test_code_flow_with_the_pasted_code(
        self,
        served: Served,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        isolated_client_config: Path,
    ) -> None:
        asked: list[str] = []

        def paste(prompt: str) -> str:
            asked.append(prompt)
            return "code-from-the-page"

        monkeypatch.setattr("builtins.input", paste)
        before = len(served.idp.token_requests)
        assert main(["--url", served.url, "--json", "login", "--no-browser"]) == 0
        document = json.loads(capsys.readouterr().out)
        assert document["username"] == "carol"  # whom the tests' provider signs in
        exchange = served.idp.token_requests[before:]
        assert [r["code"] for r in exchange] == ["code-from-the-page"]
        assert len(exchange[0]["code_verifier"]) >= 43
        assert asked
        assert main(["--url", served.url, "--json", "workflows", "list"]) == 0

    def test_username_needs_the_development_provider(
        self, served: Served, capsys: pytest.CaptureFixture[str], isolated_client_config: Path
    ) -> None:
        assert main(["--url", served.url, "login", "--username", "alice"]) == 2
        assert "not the development one" in capsys.readouterr().err
        assert not isolated_client_config.exists()
