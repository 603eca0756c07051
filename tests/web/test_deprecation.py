"""Deprecation in the web app (issue 26 point 3, contract 11): a deprecated function version
shows a banner on its function page and a badge in its versions; in the workflow editor its
node carries a badge and a note, the editor a banner naming it, and validating the graph keeps
it valid (the notice is not drawn as a problem). axe-core finds no WCAG A/AA violation."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from calcgraph.client import Client
from calcgraph.demo.platform import InProcessPlatform
from tests.web import workday
from tests.web.conftest import sign_in

PKG = "dp-web"
NOTE = "Deprecated: use dp-web/run2 (removed in 2.0.0)"
IO = {"inputs": {"x": {"type": "Float", "required": True}}, "outputs": {"y": {"type": "Float"}}}


def manifest(version: str, **fn: Any) -> dict[str, Any]:
    return {
        "kind": "package",
        "version": 1,
        "package": {"name": PKG, "version": version},
        "functions": {"run": {"handler": "main:run", **IO, **fn}},
    }


def _no_axe_violations(page: Any) -> None:
    violations = workday.axe_violations(page)
    assert violations == [], f"{page.url}: {violations}"


def test_a_deprecated_function_on_its_page_and_in_the_editor(
    platform: InProcessPlatform, new_page: Any
) -> None:
    code = {"main.py": "def run(x):\n    return {'y': x}\n"}
    doomed = {
        "deprecated": True,
        "deprecated_message": "use dp-web/run2",
        "removal_version": "2.0.0",
    }
    with Client(platform.base_url, token=platform.token("alice")) as client:
        client.publish_package(manifest("1.0.0"), code)
        report = client.publish_package(manifest("1.1.0", **doomed), {**code, "v.py": "# 1.1\n"})
        graph = {
            "nodes": [
                {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
                {
                    "node_key": "old",
                    "kind": "function",
                    "function": f"{PKG}/run",
                    "input_bindings": {
                        "x": {"source": "input_node", "input_key": "x", "from_port": "value"}
                    },
                },
            ]
        }
        client.create_workflow("dp-flow", "Deprecated flow", graph)
    function_id = report.functions[0].id

    page = new_page()
    sign_in(page, platform.base_url, "alice", path=f"/ui/functions/{function_id}")
    banner = page.get_by_role("note").filter(has_text="Deprecated")
    expect(banner).to_have_text(NOTE)
    # The function's own versions (1.0.0, then the deprecated one the package's 1.1.0 made).
    doomed_version = report.functions[0].version
    assert doomed_version != "1.0.0"
    expect(page.locator("li", has_text=doomed_version).locator(".badge")).to_have_text("deprecated")
    expect(page.locator("li", has_text="1.0.0").locator(".badge")).to_have_count(0)
    _no_axe_violations(page)

    page.goto(f"{platform.base_url}/ui/workflows/dp-flow")
    node = page.locator('.calc-node[data-node-key="old"]')
    expect(node.locator(".badge", has_text="deprecated")).to_be_visible()
    expect(node.get_by_role("note", name="old is deprecated")).to_have_text(NOTE)
    expect(page.locator('.calc-node[data-node-key="x"] .badge')).to_have_count(0)
    expect(page.get_by_test_id("editor-deprecated")).to_contain_text(f"old ({PKG}/run: {NOTE})")
    # Validating keeps the graph valid: the deprecation is a notice, not a problem.
    page.get_by_role("button", name="Validate").click()
    expect(page.get_by_test_id("editor-message")).to_have_text("The graph is valid.")
    expect(node).not_to_have_class(re.compile(r"\binvalid\b"))
    expect(page.get_by_role("list", name="Problems of old")).to_have_count(0)
    _no_axe_violations(page)
