"""The run page's controls (issue 25, contract 10) in a real browser: Cancel a run that is still
going, Re-run a failed run from its failure, Run again with the start form filled in; a retried
node's attempts on the run page (its panel and the timeline) and the retry policy in the
editor's node panel, each page with no axe-core violation."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import expect

from calcgraph.client import Client
from calcgraph.demo.platform import InProcessPlatform
from tests.web.conftest import sign_in
from tests.web.workday import axe_violations

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


def _retried() -> dict[str, Any]:
    """`second` fails every time and is tried 3 times."""
    graph = _graph("boom")
    graph["nodes"][2]["retry"] = {"max_attempts": 3, "initial_interval_s": 0, "on": ["user_error"]}
    return graph


def _waiting() -> dict[str, Any]:
    """`second` fails and waits 10 minutes for its second attempt."""
    graph = _graph("boom")
    graph["nodes"][2]["retry"] = {
        "max_attempts": 2,
        "initial_interval_s": 600,
        "on": ["user_error"],
    }
    return graph


@dataclass
class Runs:
    failed: str
    slow: str
    retried: str
    waiting: str


@pytest.fixture(scope="module")
def runs(platform: InProcessPlatform) -> Iterator[Runs]:
    with Client(platform.base_url, token=platform.token("alice")) as client:
        client.publish_package(MANIFEST, {"tools.py": SOURCE})
        client.create_workflow("rc-fails", "Fails", _graph("boom"))
        client.create_workflow("rc-slow", "Slow", _graph("slow"))
        client.create_workflow("rc-retried", "Retried", _retried())
        client.create_workflow("rc-edit", "Edit", _graph("step"))
        client.create_workflow("rc-waiting", "Waiting", _waiting())
        failed = client.start_run("rc-fails", {"x": 1}).id
        client.run_until_done(failed, timeout=120)
        retried = client.start_run("rc-retried", {"x": 1}).id
        client.run_until_done(retried, timeout=120)
        waiting = client.start_run("rc-waiting", {"x": 1}).id
        deadline = time.monotonic() + 120
        while client.tick(waiting, wait=5).node_states["second"].retry_at is None:
            assert time.monotonic() < deadline, "the failed attempt was never scheduled again"
        # `second` sleeps 30 s: the run is still going when the page cancels it.
        slow = client.start_run("rc-slow", {"x": 29}).id
        yield Runs(failed=failed, slow=slow, retried=retried, waiting=waiting)


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
    # The run page can still be on screen an instant after the address changes (its graph's
    # edge "x to first" is labelled too): ask for the start page's text box itself.
    expect(title).to_contain_text("Start a run of")
    expect(page.get_by_role("textbox", name=re.compile(r"^x "))).to_have_value("1")


def test_another_person_cannot_cancel_the_run(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "bob", path=f"/ui/runs/{runs.slow}")
    expect(page.get_by_role("button", name="Cancel", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Re-run from failure")).to_have_count(0)


def test_a_retried_nodes_attempts_on_the_run_page(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    with Client(platform.base_url, token=platform.token("alice")) as client:
        state = client.get_run(runs.retried).node_states["second"]
    earlier = [a["job_id"] for a in state.attempts]
    assert len(earlier) == 2
    page = new_page()
    sign_in(page, platform.base_url, "alice", path=f"/ui/runs/{runs.retried}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("failed")
    # The timeline: one bar per attempt of `second`, one for `first`.
    timeline = page.get_by_role("list", name="Timeline")
    second = timeline.get_by_role("listitem").filter(
        has=page.get_by_role("button", name=re.compile(r"^second: failed, 3 attempts"))
    )
    expect(second.locator(".timeline-bar")).to_have_count(3)
    expect(second.locator('.timeline-bar[data-attempt="1"]')).to_have_attribute(
        "title", re.compile(r"^attempt 1: failed")
    )
    first = timeline.get_by_role("listitem").filter(
        has=page.get_by_role("button", name=re.compile(r"^first: success"))
    )
    expect(first.locator(".timeline-bar")).to_have_count(1)
    # The node panel: each attempt with its job and error, then the last one.
    page.locator('[data-node-key="second"]').click()
    details = page.get_by_label("Node details")
    table = details.get_by_role("table", name="Attempts")
    expect(table.get_by_role("row")).to_have_count(4)  # the header and three attempts
    for number, job_id in enumerate(earlier, start=1):
        row = table.get_by_role("row").filter(has=page.get_by_role("rowheader", name=str(number)))
        expect(row.get_by_role("link", name=job_id[:8])).to_have_attribute(
            "href", f"/ui/jobs/{job_id}"
        )
        expect(row).to_contain_text("licence server unreachable")
    last = table.get_by_role("row").filter(has=page.get_by_role("rowheader", name="3"))
    expect(last.get_by_role("link", name=state.job_id[:8])).to_be_visible()
    assert axe_violations(page) == []
    # An attempt's job link opens that job.
    table.get_by_role("link", name=earlier[0][:8]).click()
    page.wait_for_url(re.compile(f"/ui/jobs/{earlier[0]}$"))


def test_a_nodes_next_attempt_on_the_run_page(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    """A node waiting for its retry: the run is still going, the node panel shows when its
    next attempt is due, and the attempts table lists the failed one with that time."""
    with Client(platform.base_url, token=platform.token("alice")) as client:
        state = client.get_run(runs.waiting).node_states["second"]
    assert (state.status, state.attempt, state.retry_at is not None) == ("pending", 2, True)
    page = new_page()
    sign_in(page, platform.base_url, "alice", path=f"/ui/runs/{runs.waiting}")
    expect(page.get_by_role("heading", level=1)).to_contain_text("running")
    page.locator('[data-node-key="second"]').click()
    details = page.get_by_label("Node details")
    facts = details.locator("dl.facts")
    expect(facts.locator("dt", has_text="Next attempt")).to_be_visible()
    expect(
        facts.locator("dt", has_text="Next attempt").locator("xpath=following-sibling::dd[1]")
    ).not_to_have_text("—")
    table = details.get_by_role("table", name=re.compile(r"^Attempts \(next at .+\)$"))
    expect(table).to_be_visible()
    first = table.get_by_role("row").filter(has=page.get_by_role("rowheader", name="1"))
    expect(first).to_contain_text("licence server unreachable")
    expect(first.get_by_role("link", name=state.attempts[0]["job_id"][:8])).to_be_visible()
    assert axe_violations(page) == []
    # The page can still cancel it: the waiting retry is cancelled with the run.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("cancelled")
    with Client(platform.base_url, token=platform.token("alice")) as client:
        after = client.get_run(runs.waiting)
    assert after.status == "cancelled"
    assert (after.node_states["second"].status, after.node_states["second"].retry_at) == (
        "cancelled",
        None,
    )


def test_the_retry_policy_in_the_editors_node_panel(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice", path="/ui/workflows/rc-edit")
    expect(page.get_by_role("heading", name="Edit — editor")).to_be_visible()
    form = page.get_by_role("form", name="Retry policy of second")
    expect(form).to_have_count(0)
    page.locator('[data-node-key="x"]').click()  # an input node has no retry policy
    expect(page.get_by_role("form", name=re.compile("^Retry policy"))).to_have_count(0)
    page.locator('[data-node-key="second"]').click()
    expect(form).to_be_visible()
    # Values the server refuses: its report names them in the panel.
    form.get_by_label("Max attempts").fill("11")
    form.get_by_label("Backoff coefficient").fill("0.5")
    form.get_by_label("On error kinds").fill("timeout, licence_blink")
    form.get_by_role("button", name="Apply retry policy").click()
    problems = form.get_by_role("alert", name="Retry policy problems of second")
    expect(problems.get_by_role("listitem")).to_have_count(3)
    expect(problems).to_contain_text("max_attempts")
    expect(problems).to_contain_text("backoff_coefficient")
    expect(problems).to_contain_text("licence_blink")
    assert axe_violations(page) == []
    # Good values: no problem left; saved in the node's `retry`.
    form.get_by_label("Max attempts").fill("4")
    form.get_by_label("Backoff coefficient").fill("3")
    form.get_by_label("On error kinds").fill("timeout, out_of_memory")
    form.get_by_label("Initial interval (s)").fill("2")
    form.get_by_role("button", name="Apply retry policy").click()
    expect(problems).to_have_count(0)
    expect(page.get_by_test_id("editor-message")).to_contain_text("Retry policy of second set")
    page.get_by_role("button", name="Save new version").click()
    expect(page.get_by_test_id("editor-message")).to_contain_text("Saved as version 2.")
    with Client(platform.base_url, token=platform.token("alice")) as client:
        graph = client.get_workflow("rc-edit").graph
    node = next(n for n in graph["nodes"] if n["node_key"] == "second")
    assert node["retry"] == {
        "max_attempts": 4,
        "initial_interval_s": 2,
        "backoff_coefficient": 3,
        "on": ["timeout", "out_of_memory"],
    }
    # The panel shows the saved policy after a reload; emptied, the node is not retried.
    page.reload()
    page.locator('[data-node-key="second"]').click()
    expect(form.get_by_label("Max attempts")).to_have_value("4")
    expect(form.get_by_label("On error kinds")).to_have_value("timeout, out_of_memory")
    for label in ("Max attempts", "Initial interval (s)", "Backoff coefficient", "On error kinds"):
        form.get_by_label(label).fill("")
    form.get_by_role("button", name="Apply retry policy").click()
    expect(page.get_by_test_id("editor-message")).to_contain_text("second is not retried")
    page.get_by_role("button", name="Save new version").click()
    expect(page.get_by_test_id("editor-message")).to_contain_text("Saved as version 3.")
    with Client(platform.base_url, token=platform.token("alice")) as client:
        graph = client.get_workflow("rc-edit").graph
    assert "retry" not in next(n for n in graph["nodes"] if n["node_key"] == "second")
