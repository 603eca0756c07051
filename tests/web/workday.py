"""The workflows of the working-day tests (issue 28): a chain to draw a cycle in, a run that
fails with a traceback, and a 200-node fan-out (its run makes 200 jobs: Jobs pages past 100)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

WD = "wd-tools"
WIDE = 200
MANIFEST: dict[str, Any] = {
    "kind": "package",
    "version": 1,
    "package": {"name": WD, "version": "1.0.0"},
    "functions": {
        "step": {
            "handler": "tools:step",
            "inputs": {"x": {"type": "Float", "required": True}},
            "outputs": {"y": {"type": "Float"}},
        },
        "boom": {
            "handler": "tools:boom",
            "inputs": {"x": {"type": "Float", "required": True}},
            "outputs": {"y": {"type": "Float"}},
        },
    },
}
SOURCE = (
    "def step(x):\n"
    "    return {'y': x + 1}\n"
    "\n"
    "def _divide(x):\n"
    "    return x / 0\n"
    "\n"
    "def boom(x):\n"
    "    print('about to divide', x)\n"
    "    return {'y': _divide(x)}\n"
)
AXE = Path(__file__).resolve().parents[2] / "web" / "node_modules" / "axe-core" / "axe.min.js"


def _input(key: str) -> dict[str, Any]:
    return {"node_key": key, "kind": "input", "input_spec": {"type_expr": "Float"}}


def _fn(key: str, function: str, source: str, port: str = "y") -> dict[str, Any]:
    binding = (
        {"source": "input_node", "input_key": source, "from_port": "value"}
        if source == "x"
        else {"source": "edge", "from_node_key": source, "from_port": port}
    )
    return {
        "node_key": key,
        "kind": "function",
        "function": f"{WD}/{function}",
        "input_bindings": {"x": binding},
    }


def chain() -> dict[str, Any]:
    return {"nodes": [_input("x"), _fn("a", "step", "x"), _fn("b", "step", "a")]}


def failing() -> dict[str, Any]:
    return {"nodes": [_input("x"), _fn("first", "step", "x"), _fn("second", "boom", "first")]}


def wide() -> dict[str, Any]:
    # Keys that sort differently as text and as numbers: b_0_2 before b_0_10.
    return {"nodes": [_input("x")] + [_fn(f"b_0_{i}", "step", "x") for i in range(WIDE)]}


def axe_violations(page: Any) -> list[str]:
    """axe-core's WCAG 2 A/AA violations of the page as it is now."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        # Through the debugging protocol, not a <script> tag: the app's Content-Security-Policy
        # (scripts from 'self' only) refuses inline scripts, as it should.
        page.evaluate("(source) => { (0, eval)(source); }", AXE.read_text())
    found = page.evaluate(
        "async () => (await axe.run(document, {runOnly: {type: 'tag', values: "
        "['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}})).violations"
        ".map(v => v.id + ': ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', '))"
    )
    return list(found)
