"""Contract 11 in the CLI: a yellow warning line when a deprecated function runs, and
`calcgraph packages diff NAME A B` printing the interface changes between two versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.client.conftest import unique
from tests.client.test_cli import Cli
from tests.client.test_cli import cli as cli

IO = {"inputs": {"x": {"type": "Length"}}, "outputs": {"y": {"type": "Length"}}}


def package_dir(tmp: Path, name: str, version: str, **fn: Any) -> str:
    folder = tmp / f"{name}-{version}"
    folder.mkdir()
    manifest = {
        "kind": "package",
        "version": 1,
        "package": {"name": name, "version": version},
        "functions": {"run": {"handler": "main:run", **IO, **fn}},
    }
    (folder / "calcgraph.yaml").write_text(yaml.safe_dump(manifest))
    (folder / "main.py").write_text("def run(x):\n    return {'y': x}\n")
    return str(folder)


class TestLifecycleCommands:
    def test_deprecated_execute_prints_a_warning(self, cli: Cli, tmp_path: Path) -> None:
        name = unique("cli-dep")
        code, _, err = cli(
            "packages",
            "publish",
            package_dir(tmp_path, name, "1.0.0", deprecated=True, deprecated_message="use v2"),
        )
        assert code == 0, err
        code, out, err = cli("functions", "execute", f"{name}/run", "--input", "x=2 m")
        assert code == 0, err
        assert "warning: run is deprecated: use v2" in err
        assert "success" in out
        code, document = cli.json("functions", "execute", f"{name}/run", "--input", "x=2 m")
        assert document["warnings"] == ["run is deprecated: use v2"]

    def test_the_warning_is_yellow(
        self, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.delenv("NO_COLOR", raising=False)
        name = unique("cli-dep")
        cli("packages", "publish", package_dir(tmp_path, name, "1.0.0", deprecated=True))
        code, _, err = cli("functions", "execute", f"{name}/run", "--input", "x=2 m")
        assert code == 0, err
        assert "\x1b[33mwarning: run is deprecated" in err

    def test_packages_diff(self, cli: Cli, tmp_path: Path) -> None:
        name = unique("cli-diff")
        cli("packages", "publish", package_dir(tmp_path, name, "1.0.0"))
        changed = package_dir(
            tmp_path, name, "1.0.1", inputs={"x": {"type": "Force"}}, outputs=IO["outputs"]
        )
        (Path(changed) / "main.py").write_text("def run(x):\n    return {'y': 2 * x}\n")
        code, _, err = cli("packages", "publish", changed)
        assert code == 0, err
        code, out, err = cli("packages", "diff", name, "1.0.0", "1.0.1")
        assert code == 0, err
        assert f"{name} 1.0.0 -> 1.0.1: 1 interface change(s), 1 breaking" in out
        assert "input_type" in out
        code, document = cli.json("packages", "diff", name, "1.0.0", "1.0.1")
        assert [c["change"] for c in document["changes"]] == ["input_type"]
        code, _, err = cli("packages", "diff", name, "1.0.0", "9.9.9")
        assert code != 0
        assert "9.9.9" in err


def with_dependencies(folder: str, deps: dict[str, str]) -> str:
    path = Path(folder) / "calcgraph.yaml"
    manifest = yaml.safe_load(path.read_text())
    manifest["package"]["dependencies"] = deps
    path.write_text(yaml.safe_dump(manifest))
    return folder


class TestDependenciesInTheCli:
    def test_publish_prints_the_pins(self, cli: Cli, tmp_path: Path) -> None:
        base, lib, app = unique("cli-base"), unique("cli-lib"), unique("cli-app")
        cli("packages", "publish", package_dir(tmp_path, base, "1.0.0"))
        cli("packages", "publish", package_dir(tmp_path, base, "1.1.0"))
        folder = with_dependencies(package_dir(tmp_path, lib, "0.3.0"), {base: "~1.0"})
        code, _, err = cli("packages", "publish", folder)
        assert code == 0, err
        folder = with_dependencies(package_dir(tmp_path, app, "1.0.0"), {lib: "^0.3"})
        code, out, err = cli("packages", "publish", folder)
        assert code == 0, err
        rows = [line.split() for line in out.splitlines()]
        assert any(lib in row and "0.3.0" in row and "declared" in row for row in rows), out
        assert any(base in row and "1.0.0" in row and "brought" in row for row in rows), out
        code, document = cli.json("packages", "publish", package_dir(tmp_path, app, "1.0.1"))
        assert document["dependencies"] == {}
        folder = with_dependencies(package_dir(tmp_path, app, "1.0.2"), {lib: ">=1"})
        code, _, err = cli("packages", "publish", folder)
        assert code != 0
        assert f"dependency {lib!r}: no hosted version is admitted by '>=1'" in err
        assert "versions: 0.3.0" in err
