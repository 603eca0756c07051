"""Issue 15, a newcomer's first hour with the CLI: quiet client commands, `--version`, a bad
setting named by its variable, a workflow report printed once, "did you mean", cache hits
marked in the run's progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from calcgraph import __version__
from calcgraph.cli import main
from tests.client.conftest import DemoCopy, Served, unique
from tests.client.test_cli import Cli, demo_inputs


@pytest.fixture
def cli(served: Served, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(served, capsys)


def _calcgraph(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command in a fresh interpreter: logging set up as a user's shell gets it."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CALCGRAPH_")}
    return subprocess.run(
        [sys.executable, "-m", "calcgraph", *argv],
        env=base | (env or {}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"calcgraph {__version__}\n"


def test_client_commands_print_no_library_logs(served: Served, tmp_path: Path) -> None:
    env = {"CALCGRAPH_CREDENTIALS_FILE": str(tmp_path / "credentials.json")}
    result = _calcgraph("--url", served.url, "--token", served.token(), "packages", "list", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "HTTP Request" not in result.stdout


@pytest.mark.parametrize(
    ("variable", "value"),
    [("CALCGRAPH_SANDBOX", "podman"), ("CALCGRAPH_DEV_IDP_PORT", "eighty")],
)
def test_a_bad_setting_is_named_by_its_variable(variable: str, value: str) -> None:
    result = _calcgraph("token", "alice", env={variable: value})
    assert result.returncode == 2
    assert f"{variable}={value}" in result.stderr
    assert "validation error for Settings" not in result.stderr
    assert "Traceback" not in result.stderr


class TestWithAServer:
    def test_a_workflow_report_is_printed_once(
        self, cli: Cli, demo: DemoCopy, tmp_path: Path
    ) -> None:
        cli("packages", "publish", str(demo.directory))
        graph = demo.graph
        beam = next(node for node in graph["nodes"] if node["node_key"] == "beam")
        beam["function"] = f"{demo.name}/cantilevr"
        path = tmp_path / "graph.json"
        path.write_text(json.dumps(graph))
        code, _, err = cli("workflows", "create", str(path), "--slug", unique("bad"))
        assert code == 7
        assert err.count("cantilevr") == 1, err
        assert f"unknown_functions: beam: no function matches '{demo.name}/cantilevr'" in err
        assert "{'node_key'" not in err

    def test_did_you_mean_from_what_the_caller_sees(
        self, cli: Cli, demo: DemoCopy, tmp_path: Path
    ) -> None:
        cli("packages", "publish", str(demo.directory))
        slug = unique("beam-check")
        graph_file = tmp_path / "graph.json"
        graph_file.write_text(json.dumps(demo.graph))
        assert cli("workflows", "create", str(graph_file), "--slug", slug)[0] == 0
        typo = slug.replace("check", "chek")
        code, _, err = cli("runs", "start", typo)
        assert code == 5
        assert f"did you mean '{slug}'?" in err
        code, _, err = cli("workflows", "show", typo)
        assert f"did you mean '{slug}'?" in err
        code, _, err = cli("functions", "execute", f"{demo.name[:-1]}/cantilever")
        assert code == 5
        assert f"did you mean '{demo.name}'?" in err
        code, _, err = cli("functions", "execute", f"{demo.name}/cantilevr")
        assert f"did you mean '{demo.name}/cantilever'?" in err
        code, out, _ = cli("--json", "runs", "start", typo)
        assert json.loads(out)["error"]["detail"].endswith(f"did you mean '{slug}'?")
        # Bob sees none of alice's private workflows: nothing of hers is suggested to him.
        code, _, err = cli("runs", "start", typo, user="bob")
        assert code == 5
        assert "did you mean" not in err

    def test_cache_hits_are_marked_in_the_progress(
        self, cli: Cli, demo: DemoCopy, tmp_path: Path
    ) -> None:
        cli("packages", "publish", str(demo.directory))
        slug = unique("cached")
        graph_file = tmp_path / "graph.json"
        graph_file.write_text(json.dumps(demo.graph))
        cli("workflows", "create", str(graph_file), "--slug", slug)
        code, first, _ = cli("runs", "start", slug, *demo_inputs())
        assert code == 0
        assert "cache hit" not in first
        code, again, _ = cli("runs", "start", slug, *demo_inputs())
        assert code == 0
        hits = [line for line in again.splitlines() if line.endswith("cache hit")]
        assert any("] beam " in line for line in hits), again


def test_make_serve_takes_a_port() -> None:
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        ["make", "-n", "serve", "PORT=8123"], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    # Under a parent make (make test), make[1] also prints the folders it enters and leaves.
    commands = [line for line in result.stdout.splitlines() if not line.startswith("make[")]
    assert commands[-1].endswith("calcgraph serve --port 8123")
