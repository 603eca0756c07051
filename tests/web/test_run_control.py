"""The run page's controls (issue 25, contract 10) in a real browser: Cancel a run that is still
going, Re-run a failed run from its failure, Run again with the start form filled in."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import expect

from calcgraph.client import Client
from calcgraph.demo.platform import InProcessPlatform
from tests.web.conftest import sign_in

RC = "rc-tools"
MANIFEST: dict[str, Any] = {
    "kind": "package",
    "version": 1,
    "package": {"name": RC, "version": "1.0.0"},
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
        "slow": {
            "handler": "tools:slow",
            "inputs": {"x": {"type": "Float", "required": True}},
            "outputs": {"y": {"type": "Float"}},
        },
    },
}
SOURCE = (
    "import time\n"
    "\n"
    "def step(x):\n"
    "    return {'y': x + 1}\n"
    "\n"
    "def boom(x):\n"
    "    raise RuntimeError('licence server unreachable')\n"
    "\n"
    "def slow(x):\n"
    "    time.sleep(x)\n"
    "    return {'y': x}\n"
)


def _graph(second: str) -> dict[str, Any]:
    def fn(key: str, function: str, binding: dict[str, Any]) -> dict[str, Any]:
        return {
            "node_key": key,
            "kind": "function",
            "function": f"{RC}/{function}",
            "input_bindings": {"x": binding},
        }

    return {
        "nodes": [
            {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
            fn("first", "step", {"source": "input_node", "input_key": "x", "from_port": "value"}),
            fn("second", second, {"source": "edge", "from_node_key": "first", "from_port": "y"}),
        ]
    }


@dataclass
class Runs:
    failed: str
    slow: str


@pytest.fixture(scope="module")
def runs(platform: InProcessPlatform) -> Iterator[Runs]:
    with Client(platform.base_url, token=platform.token("alice")) as client:
        client.publish_package(MANIFEST, {"tools.py": SOURCE})
        client.create_workflow("rc-fails", "Fails", _graph("boom"))
        client.create_workflow("rc-slow", "Slow", _graph("slow"))
        failed = client.start_run("rc-fails", {"x": 1}).id
        client.run_until_done(failed, timeout=120)
        # `second` sleeps 30 s: the run is still going when the page cancels it.
        slow = client.start_run("rc-slow", {"x": 29}).id
        yield Runs(failed=failed, slow=slow)


def test_cancel_a_running_run_and_rerun_a_failed_one_from_its_failure(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    base = platform.base_url
    title = page.get_by_role("heading", level=1)

    # Cancel asks first; declining changes nothing.
    sign_in(page, base, "alice", path=f"/ui/runs/{runs.slow}")
    cancel = page.get_by_role("button", name="Cancel", exact=True)
    expect(cancel).to_be_visible()
    expect(page.get_by_role("button", name="Re-run from failure")).to_have_count(0)
    page.once("dialog", lambda dialog: dialog.dismiss())
    cancel.click()
    expect(title).not_to_contain_text("cancelled")
    page.once("dialog", lambda dialog: dialog.accept())
    cancel.click()
    expect(title).to_contain_text("cancelled")
    expect(cancel).to_have_count(0)
    page.reload()
    expect(title).to_contain_text("cancelled")
    # A cancelled run can be re-run too.
    expect(page.get_by_role("button", name="Re-run from failure")).to_be_visible()

    # Re-run from failure: a new run, its succeeded node reused, the failed one run again.
    page.goto(f"{base}/ui/runs/{runs.failed}")
    expect(title).to_contain_text("failed")
    expect(page.get_by_role("button", name="Cancel", exact=True)).to_have_count(0)
    page.get_by_role("button", name="Re-run from failure").click()
    page.wait_for_url(re.compile(r"/ui/runs/(?!" + runs.failed + r")[0-9a-f-]+"))
    expect(page.get_by_role("link", name=runs.failed[:8])).to_be_visible()
    expect(title).to_contain_text("failed", timeout=60_000)
    page.locator('[data-node-key="first"]').click()
    details = page.get_by_label("Node details")
    expect(details).to_contain_text("Reused")
    expect(details).to_contain_text("yes")

    # Run again: the start form with the run's inputs.
    page.get_by_role("button", name="Run again").click()
    page.wait_for_url(re.compile(r"/ui/workflows/rc-fails/run$"))
    expect(page.get_by_label(re.compile(r"^x "))).to_have_value("1")


def test_another_person_cannot_cancel_the_run(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "bob", path=f"/ui/runs/{runs.slow}")
    expect(page.get_by_role("button", name="Cancel", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Re-run from failure")).to_have_count(0)
