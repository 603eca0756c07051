"""`calcgraph demo` end to end: the real platform in-process (uvicorn, workers, sandbox, the
development identity provider), on a real SQLite file or PostgreSQL database."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pint
import pytest

from calcgraph.cli import main
from calcgraph.demo import DEMO_INPUTS
from calcgraph.settings import get_settings
from tests.conftest import POSTGRES_URL, _reset_postgres
from tests.execution.conftest import default_sandbox
from tests.sandbox.conftest import _make_backend

pytestmark = pytest.mark.db

STAMPED = re.compile(
    r"^\[\s*[\d.]+s\] (\S+)\s+(?:\S+\s+)?(pending|running|success|failed|cancelled|completed)\b"
)


def expected_outputs() -> dict[str, Any]:
    """The verdict node's outputs, recomputed from the demo inputs with the beam formulas."""
    ureg = pint.UnitRegistry()

    def si(name: str) -> float:
        raw = DEMO_INPUTS[name]
        if isinstance(raw, dict):
            return float(ureg.Quantity(raw["value"], raw["unit"]).to_base_units().magnitude)
        return float(raw)

    length, force = si("span"), si("load")
    deflection = force * length**3 / (3 * si("youngs_modulus") * si("second_moment"))
    utilisation = force * length / si("section_modulus") / si("yield_stress")
    ratio = deflection / (length / 125)
    worst = max(utilisation, ratio)
    governs = "strength" if utilisation >= ratio else "stiffness"
    return {
        "safety_factor": 1 / worst,
        "verdict": f"{'PASS' if worst <= 1 else 'FAIL'} ({governs} governs)",
    }


@pytest.fixture
async def demo_url(backend: str, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"
    url = f"{POSTGRES_URL}_demo"
    await _reset_postgres(url)
    return url


@pytest.fixture
def configured(demo_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The environment `calcgraph demo` reads: the test's database, the default identity."""
    monkeypatch.setenv("CALCGRAPH_DATABASE_URL", demo_url)
    for name in ("CALCGRAPH_OIDC_ISSUER", "CALCGRAPH_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    yield demo_url
    get_settings.cache_clear()


def _demo(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["demo", "--sandbox", default_sandbox(), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _changes(out: str) -> list[tuple[str, str]]:
    matches = (STAMPED.match(line) for line in out.splitlines())
    return [(m.group(1), m.group(2)) for m in matches if m]


class TestDemo:
    def test_runs_to_completion_twice_on_the_same_database(
        self, configured: str, capfd: pytest.CaptureFixture[str]
    ) -> None:
        want = expected_outputs()
        code, out, err = _demo(capfd)  # capfd: the provider's process writes to the terminal too
        assert code == 0, out + err
        # The provider's record of the sign-in stays out of the demo user's terminal.
        assert "issued authorization code" not in err
        assert "package demo-beam 1.2.0: published" in out
        assert "workflow beam-check v1: created" in out
        printed = dict(re.findall(r"^  verdict\.(\w+) = (.+)$", out, re.MULTILINE))
        assert float(printed["safety_factor"]) == pytest.approx(want["safety_factor"], rel=1e-5)
        assert printed["verdict"] == want["verdict"]
        # The checks it computed on the way, with their units (issue 15), not only the verdict.
        checks = dict(re.findall(r"^  (\w+\.\w+) = (.+)$", out, re.MULTILINE))
        assert checks["beam.moment"] == "36000 N·m"
        assert checks["beam.shear"] == "12000 N"
        assert checks["beam.deflection"].endswith(" m")
        assert checks["strength.stress"].endswith(" Pa")
        assert float(checks["strength.utilisation"]) > 0
        assert float(checks["stiffness.ratio"]) > 0
        assert "cache hit" not in out

        # Not a terminal: one line per state change, in order, never a repeated state.
        changes = _changes(out)
        last: dict[str, str] = {}
        for key, status in changes:
            assert last.get(key) != status, f"{key} {status} printed twice:\n{out}"
            last[key] = status
        assert last == {
            "run": "completed",
            "beam": "success",
            "root_moment": "success",
            "strength": "success",
            "stiffness": "success",
            "verdict": "success",
        }
        assert changes[0] == ("run", "pending")
        assert changes[-1] == ("run", "completed")
        assert [s for k, s in changes if k == "beam"] in (["running", "success"], ["success"])

        # Again on the same database: the published version and the workflow are reused.
        code, out, err = _demo(capfd, "--json")
        assert code == 0, out + err
        assert "package demo-beam 1.2.0: already published, reusing it" in err
        assert "workflow beam-check v1: unchanged, reusing it" in err
        run = json.loads(out)
        assert run["status"] == "completed"
        assert run["inputs"] == DEMO_INPUTS
        outputs = run["terminal_outputs"]["verdict"]
        assert outputs["safety_factor"] == pytest.approx(want["safety_factor"], rel=1e-12)
        assert outputs["verdict"] == want["verdict"]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_failed_run_exits_1_naming_the_node(
    configured: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if isinstance(_make_backend("process"), str):
        pytest.skip("the process sandbox is not available here")
    caplog.clear()  # the probe above made a backend, which warned too
    # A yield stress of zero makes stress_check divide by zero: a user error in the sandbox.
    monkeypatch.setitem(DEMO_INPUTS, "yield_stress", {"value": 0, "unit": "MPa"})
    code = main(["demo", "--fresh", "--sandbox", "process"])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    # The weak sandbox says so, loudly and once, even though the demo quiets the logs.
    weak = [r for r in caplog.records if r.levelno >= logging.WARNING and "`process`" in r.msg]
    assert len(weak) == 1, caplog.text
    assert "failed node: strength" in out
    assert re.search(r"error: user_error: .*ZeroDivisionError", out), out
    assert ("verdict", "cancelled") in _changes(out)
    assert ("run", "failed") in _changes(out)
    # --fresh left the configured database alone.
    assert not Path(configured.removeprefix("sqlite+aiosqlite:///")).exists()


def test_refuses_without_the_development_identity_provider(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CALCGRAPH_OIDC_ISSUER", "https://sso.example.com/realms/x")
    get_settings.cache_clear()
    try:
        assert main(["demo", "--fresh"]) == 2
    finally:
        get_settings.cache_clear()
    assert "unset CALCGRAPH_OIDC_ISSUER" in capsys.readouterr().err
