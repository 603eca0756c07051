"""The web app for a working day (issue 28), in a real browser: the run page's graph with its
edges, timeline, units and folded traceback; an editor that loses nothing (discard after save,
undo, delete, a confirmed rebinding, a refused cycle); a 200-node graph that fits; Jobs past 100;
page titles, the favicon, dark mode; axe-core finds no WCAG A/AA violation on any page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from calcgraph.client import Client
from calcgraph.demo.platform import InProcessPlatform
from tests.web import workday
from tests.web.conftest import DEMO_SLUG, sign_in

DEMO_INPUTS = {
    "span": {"value": 3, "unit": "m"},
    "load": {"value": 12, "unit": "kN"},
    "youngs_modulus": {"value": 210, "unit": "GPa"},
    "second_moment": 8.356e-5,
    "section_modulus": {"value": 557, "unit": "cm**3"},
    "yield_stress": {"value": 355, "unit": "MPa"},
}


@dataclass
class Runs:
    demo: str
    failed: str
    wide: str


@pytest.fixture(scope="module")
def runs(platform: InProcessPlatform) -> Iterator[Runs]:
    with Client(platform.base_url, token=platform.token("alice")) as client:
        client.publish_package(workday.MANIFEST, {"tools.py": workday.SOURCE})
        client.create_workflow("wd-chain", "Chain", workday.chain())
        client.create_workflow("wd-fails", "Fails", workday.failing())
        client.create_workflow("wd-wide", "Wide", workday.wide())
        demo = client.start_run(DEMO_SLUG, DEMO_INPUTS).id
        failed = client.start_run("wd-fails", {"x": 1}).id
        wide = client.start_run("wd-wide", {"x": 1}).id
        for run in (demo, failed, wide):
            client.run_until_done(run, timeout=240)
        yield Runs(demo=demo, failed=failed, wide=wide)


def _no_axe_violations(page: Any) -> None:
    violations = workday.axe_violations(page)
    assert violations == [], f"{page.url}: {violations}"


def test_the_run_page_draws_edges_a_timeline_and_values_in_units(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice", path=f"/ui/runs/{runs.demo}")
    expect(page.get_by_role("heading", name=re.compile(r"^Run .* completed$"))).to_be_visible()
    graph = page.get_by_label("Run graph", exact=True)
    # Every binding is an edge on the page, laid out (not stacked at one point).
    edges = int(graph.get_attribute("data-edges") or "0")
    assert edges >= 12
    expect(graph.locator(".run-edge")).to_have_count(edges)
    boxes = [n.bounding_box() for n in graph.locator(".react-flow__node").all()]
    xs = {box["x"] for box in boxes if box}
    assert len(xs) >= 4, xs  # inputs, beam, checks, verdict in their own ranks
    # dagre laid the plan out in the page's worker, not on the page's thread.
    where = page.evaluate(
        "() => performance.getEntriesByName('calcgraph:layout', 'measure').map(m => m.detail)"
    )
    assert where == [{"where": "worker", "boxes": len(boxes)}], where
    expect(page).to_have_title(re.compile(r"^Run [0-9a-f]{8} completed · calcgraph$"))

    # The run's inputs as entered, not as JSON.
    inputs = page.get_by_role("table").filter(has=page.get_by_role("columnheader", name="Input"))
    expect(inputs).to_contain_text("3 m")
    expect(inputs).to_contain_text("557 cm³")
    expect(inputs).not_to_contain_text('"unit"')

    # A node's values in engineering units, and the node in the URL.
    page.locator('[data-node-key="beam"]').click()
    expect(page).to_have_url(re.compile(r"\?node=beam$"))
    details = page.get_by_label("Node details")
    expect(details.get_by_role("table", name="Inputs")).to_contain_text("210 GPa")
    expect(details.get_by_role("table", name="Inputs")).not_to_contain_text("210000000000")
    expect(details.get_by_role("table", name="Outputs")).to_contain_text("36 kN·m")
    # A display unit of the person's choosing.
    page.get_by_text("Display units").click()
    page.get_by_label("Display unit for N·m").fill("N*m")
    expect(details.get_by_role("table", name="Outputs")).to_contain_text("36000 N·m")

    # The timeline has a bar per node that ran; a click selects the node.
    timeline = page.get_by_role("list", name="Timeline")
    # beam, root_moment, the two checks, verdict
    expect(timeline.get_by_role("listitem")).to_have_count(5)
    timeline.get_by_role("button", name=re.compile(r"^verdict: success")).click()
    expect(page).to_have_url(re.compile(r"\?node=verdict$"))
    page.reload()
    expect(page.get_by_label("Node details").get_by_role("heading", level=2)).to_contain_text(
        "verdict"
    )
    _no_axe_violations(page)


def test_a_failed_run_opens_on_its_failed_node_with_the_traceback_folded(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice", path=f"/ui/runs/{runs.failed}")
    expect(page.get_by_role("heading", name=re.compile(r"^Run .* failed$"))).to_be_visible()
    details = page.get_by_label("Node details")
    expect(details.get_by_role("heading", name=re.compile("^second"))).to_be_visible()
    expect(page.locator('[data-node-key="second"]')).to_have_class(re.compile("selected"))
    alert = details.get_by_role("alert")
    expect(alert).to_contain_text("ZeroDivisionError")
    trace = alert.locator("details")
    expect(trace).not_to_have_attribute("open", "")
    expect(trace.locator("pre")).not_to_be_visible()
    trace.locator("summary").click()
    expect(trace.locator("pre")).to_contain_text("_divide")
    # What the function printed stays in the logs, without the traceback.
    expect(details.get_by_label("Logs")).to_contain_text("about to divide")
    expect(details.get_by_label("Logs")).not_to_contain_text("Traceback")
    _no_axe_violations(page)


def _wait_saved(page: Any, version: int) -> None:
    expect(page.get_by_test_id("editor-message")).to_contain_text(f"Saved as version {version}.")


def test_the_editor_loses_nothing_discard_after_save_undo_delete(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    base = platform.base_url
    sign_in(page, base, "alice", path="/ui/workflows/wd-chain")
    expect(page.get_by_role("heading", name="Chain — editor")).to_be_visible()
    expect(page).to_have_title("Chain — editor · calcgraph")
    message = page.get_by_test_id("editor-message")

    # A new input lands where the person is looking.
    page.get_by_label("Key of the new input").fill("extra")
    page.get_by_label("Type of the new input").fill("Float")
    page.get_by_role("button", name="Add input").click()
    added = page.locator('[data-node-key="extra"]')
    expect(added).to_be_in_viewport()
    box = page.get_by_label("Workflow graph", exact=True).bounding_box()
    node = added.bounding_box()
    assert box
    assert node
    assert box["x"] <= node["x"] <= box["x"] + box["width"]

    # Save with Ctrl+S, then discard: the saved version (2) stays, nothing older comes back.
    page.get_by_label("Workflow graph", exact=True).click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+s")
    _wait_saved(page, 2)
    expect(page.get_by_test_id("editor-version")).to_have_text("Version 2")
    page.get_by_label("Key of the new function").fill("late")
    page.get_by_label("Function to add").select_option(f"{workday.WD}/step")
    page.get_by_role("button", name="Add function").click()
    expect(page.locator('[data-node-key="late"]')).to_have_count(1)
    page.get_by_role("button", name="Discard changes").click()
    expect(page.locator('[data-node-key="late"]')).to_have_count(0)
    expect(page.locator('[data-node-key="extra"]')).to_have_count(1)  # saved in version 2
    expect(page.get_by_test_id("editor-version")).to_have_text("Version 2")
    # Undo brings the discarded edit back; redo discards it again.
    page.get_by_role("button", name="Undo").click()
    expect(page.locator('[data-node-key="late"]')).to_have_count(1)
    page.get_by_role("button", name="Redo").click()
    expect(page.locator('[data-node-key="late"]')).to_have_count(0)
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {platform.token('alice')}"}
    ) as http:
        saved = http.get("/workflows/wd-chain").json()
    assert saved["version"] == 2
    assert "extra" in {n["node_key"] for n in saved["graph"]["nodes"]}

    # An edge is selected (focused, Enter: the keyboard way) and deleted with the Delete key;
    # Ctrl+Z brings it back.
    edge = page.locator('.react-flow__edge[aria-label="Edge a.y to b.x"]')
    expect(edge).to_have_count(1)
    edge.focus()
    page.keyboard.press("Enter")
    expect(edge).to_have_class(re.compile("selected"))
    page.keyboard.press("Delete")
    expect(message).to_contain_text("Deleted 1 edge(s)")
    expect(edge).to_have_count(0)
    page.keyboard.press("Control+z")
    expect(edge).to_have_count(1)
    # A node too.
    page.locator('[data-node-key="extra"]').click()
    page.keyboard.press("Delete")
    expect(page.locator('[data-node-key="extra"]')).to_have_count(0)
    page.keyboard.press("Control+z")
    expect(page.locator('[data-node-key="extra"]')).to_have_count(1)

    # Drawing into a bound port asks first; a cycle is refused by the server's validation.
    page.get_by_label("From port").select_option("b.y")
    page.get_by_label("To port").select_option("a.x")
    page.get_by_role("button", name="Connect", exact=True).click()
    confirm = page.get_by_role("alertdialog", name="Replace binding")
    expect(confirm).to_contain_text("a.x is already bound to x.value")
    confirm.get_by_role("button", name="Replace binding").click()
    expect(message).to_contain_text("would close a cycle")
    expect(message).to_contain_text("a -> b -> a")
    # Nothing was drawn: a.x is still bound to the input.
    expect(page.locator('.react-flow__edge[aria-label="Edge x.value to a.x"]')).to_have_count(1)
    _no_axe_violations(page)

    # Edits survive a reload (sessionStorage), on the saved version.
    page.get_by_label("Key of the new input").fill("kept")
    page.get_by_role("button", name="Add input").click()
    page.reload()
    expect(page.locator('[data-node-key="kept"]')).to_have_count(1)
    expect(page.get_by_test_id("editor-version")).to_have_text("Version 2 (unsaved changes)")


def _inside(inner: dict[str, float] | None, outer: dict[str, float] | None) -> bool:
    assert inner
    assert outer
    return (
        inner["x"] >= outer["x"] - 1
        and inner["y"] >= outer["y"] - 1
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 1
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 1
    )


def test_a_200_node_graph_fits_is_searchable_and_sorted_naturally(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice", path="/ui/workflows/wd-wide")
    flow = page.get_by_label("Workflow graph", exact=True)
    expect(flow.locator(".react-flow__node")).to_have_count(workday.WIDE + 1)
    area = flow.locator(".react-flow__renderer").bounding_box()
    for key in ("x", "b_0_0", f"b_0_{workday.WIDE - 1}"):
        assert _inside(page.locator(f'[data-node-key="{key}"]').bounding_box(), area), key
    expect(page.get_by_label("Minimap of the workflow graph")).to_be_visible()
    options = page.get_by_label("From port").locator("option").all_inner_texts()
    assert options.index("b_0_2.y") < options.index("b_0_10.y")
    page.get_by_label("Filter ports").fill("b_0_19")
    expect(page.get_by_label("From port").locator("option")).to_have_count(1 + 11)
    # Node search brings the node into view and selects it.
    page.get_by_label("Find node").fill("b_0_150")
    page.get_by_role("button", name="Find", exact=True).click()
    expect(page.locator('[data-node-key="b_0_150"]')).to_have_class(re.compile("selected"))
    expect(page.locator('[data-node-key="b_0_150"]')).to_be_in_viewport()

    # The run page of the same graph fits too.
    page.goto(platform.base_url + f"/ui/runs/{runs.wide}")
    expect(page.get_by_role("heading", name=re.compile(r"^Run .* completed$"))).to_be_visible(
        timeout=20_000
    )
    run_flow = page.get_by_label("Run graph", exact=True)
    expect(run_flow.locator(".run-edge")).to_have_count(workday.WIDE, timeout=20_000)
    area = run_flow.locator(".react-flow__renderer").bounding_box()
    for key in ("x", "b_0_0", f"b_0_{workday.WIDE - 1}"):
        assert _inside(page.locator(f'[data-node-key="{key}"]').bounding_box(), area), key


def test_jobs_page_past_100_and_lists_filter_and_link(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice", path="/ui/jobs")
    expect(page).to_have_title("Jobs · calcgraph")
    rows = page.get_by_role("table").locator("tbody tr")
    expect(rows).to_have_count(100)
    first_page = set(rows.locator("td:first-child").all_inner_texts())
    page.get_by_role("button", name="Next page").click()
    expect(page.get_by_text("Page 2")).to_be_visible()
    expect(rows.first).to_be_visible()
    second_page = set(rows.locator("td:first-child").all_inner_texts())
    assert second_page
    assert not (first_page & second_page)
    _no_axe_violations(page)
    page.get_by_role("button", name="Previous page").click()
    expect(page.get_by_text("Page 1")).to_be_visible()
    # A job of a run links its run, opened on the job's node.
    link = rows.first.get_by_role("link", name=re.compile(r"^wd-\S+ · "))
    node = link.inner_text().rsplit(" · ", 1)[1]
    link.click()
    expect(page).to_have_url(re.compile(rf"/runs/[0-9a-f-]+\?node={re.escape(node)}$"))
    page.go_back()
    # Back to the list: the cached page shows at once (and is revalidated).
    expect(rows).to_have_count(100)

    # The filters are the server's: every failed job of alice's (the failing run's), whatever
    # page it was on, and a function search across all pages.
    page.get_by_label("Status").select_option("failed")
    expect(page).to_have_url(re.compile(r"status=failed"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("wd-tools/boom")
    page.get_by_label("Status").select_option("")
    page.get_by_label("Function").fill("wd-tools/boom")
    expect(page).to_have_url(re.compile(r"function=wd-tools%2Fboom"))
    expect(rows).to_have_count(1)
    page.get_by_label("Function").fill("")
    expect(rows).to_have_count(100)
    page.get_by_label("Created before").fill("2000-01-01")
    expect(page.get_by_text("No job matches these filters")).to_be_visible()
    page.get_by_label("Created before").fill("")
    page.get_by_label("Created on or after").fill("2000-01-01")
    expect(rows).to_have_count(100)
    _no_axe_violations(page)
    # bob sees none of alice's jobs, filtered or not.
    bob = new_page()
    sign_in(bob, platform.base_url, "bob", path="/ui/jobs?function=wd-tools")
    expect(bob.get_by_text("No job matches these filters")).to_be_visible()

    # The job page names its run, node and workflow.
    page.goto(platform.base_url + "/ui/jobs?status=failed")
    rows.first.locator("td:first-child a").click()
    expect(page.get_by_role("link", name="Fails")).to_have_attribute(
        "href", "/ui/workflows/wd-fails"
    )
    expect(page.get_by_role("link", name="second", exact=True)).to_have_attribute(
        "href", f"/ui/runs/{runs.failed}?node=second"
    )
    _no_axe_violations(page)

    # Runs: filtered by workflow on the server, linked to the workflow and the failed node.
    page.goto(platform.base_url + "/ui/runs")
    page.get_by_label("Workflow").select_option("wd-fails")
    expect(page).to_have_url(re.compile(r"workflow=wd-fails"))
    runs_rows = page.get_by_role("table").locator("tbody tr")
    expect(runs_rows).to_have_count(1)
    runs_rows.get_by_role("link", name="second").click()
    expect(page).to_have_url(re.compile(rf"/runs/{runs.failed}\?node=second$"))
    page.goto(platform.base_url + "/ui/runs?status=cancelled")
    expect(page.get_by_text("No run matches these filters")).to_be_visible()
    # A start date range, on the server.
    page.goto(platform.base_url + "/ui/runs?after=2000-01-01")
    expect(runs_rows.first).to_be_visible()
    page.get_by_label("Started before").fill("2000-01-02")
    expect(page.get_by_text("No run matches these filters")).to_be_visible()
    _no_axe_violations(page)


def test_workflows_show_their_last_run_and_search_on_the_server(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice", path="/ui/workflows")
    failed = page.get_by_role("link", name=re.compile(r"^Last run of wd-fails: failed"))
    expect(failed).to_have_attribute("href", f"/ui/runs/{runs.failed}")
    expect(
        page.get_by_role("link", name=re.compile(r"^Last run of wd-wide: completed"))
    ).to_be_visible()
    expect(page.get_by_role("row").filter(has_text="wd-chain")).to_contain_text("never run")
    page.get_by_label("Search").fill("WD-F")
    expect(page).to_have_url(re.compile(r"q=WD-F"))
    expect(page.get_by_role("table").locator("tbody tr")).to_have_count(1)
    _no_axe_violations(page)
    page.get_by_label("Search").fill("no-such-workflow")
    expect(page.get_by_text('No workflow matches "no-such-workflow"')).to_be_visible()
    # bob never sees alice's private workflows nor her runs.
    bob = new_page()
    sign_in(bob, platform.base_url, "bob", path="/ui/workflows?q=wd")
    expect(bob.get_by_text('No workflow matches "wd"')).to_be_visible()


PUBLISHED = "wd-published"
PUBLISHED_SOURCE = "def triple(x):\n    return {'y': x * 3}\n"


def test_publish_a_package_from_files_then_run_its_function(
    platform: InProcessPlatform, runs: Runs, new_page: Any, tmp_path: Any
) -> None:
    manifest = tmp_path / "calcgraph.yaml"
    manifest.write_text(
        f"kind: package\nversion: 1\npackage: {{name: {PUBLISHED}, version: 1.0.0}}\n"
        "functions:\n  triple:\n    handler: calc:triple\n"
        "    inputs: {x: {type: Float, required: true}}\n    outputs: {y: {type: Float}}\n"
    )
    module = tmp_path / "calc.py"
    module.write_text(PUBLISHED_SOURCE)
    page = new_page()
    sign_in(page, platform.base_url, "alice", path="/ui/packages")
    page.get_by_role("link", name="Publish a package or function").click()
    expect(page).to_have_title("Publish a package · calcgraph")
    _no_axe_violations(page)
    page.get_by_label("Or pick calcgraph.yaml and its modules").set_input_files(
        [str(manifest), str(module)]
    )
    sent = page.get_by_role("table", name="What will be sent")
    expect(sent).to_contain_text("calc.py")
    page.get_by_role("button", name="Publish package").click()
    report = page.get_by_role("status")
    expect(report).to_contain_text(f"Published {PUBLISHED} 1.0.0")
    _no_axe_violations(page)
    report.get_by_role("link", name="triple").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("triple")
    page.get_by_label(re.compile(r"^x ")).fill("14")
    page.get_by_role("button", name="Run function").click()
    expect(page.get_by_text("42", exact=True)).to_be_visible(timeout=60_000)
    # The packages list finds it by a part of its name, on the server.
    page.goto(platform.base_url + "/ui/packages?q=PUBLISHED")
    expect(page.get_by_role("table").locator("tbody tr")).to_have_count(1)

    # A manifest the server refuses: its message, not a client-side copy of its rules.
    manifest.write_text("kind: package\nversion: 1\npackage: {name: wd-bad}\nfunctions: {}\n")
    page.goto(platform.base_url + "/ui/publish")
    page.get_by_label("Or pick calcgraph.yaml and its modules").set_input_files([str(manifest)])
    page.get_by_role("button", name="Publish package").click()
    expect(page.get_by_role("alert")).to_contain_text("ValidationError")


def test_a_single_function_refused_shows_the_servers_rule_and_line(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice", path="/ui/functions")
    page.get_by_role("link", name="Publish a function").click()
    expect(page).to_have_title("Publish a function · calcgraph")
    _no_axe_violations(page)
    page.get_by_label("Name").fill("wd-risky")
    page.get_by_label("Code (main.py)").fill(
        "import os\n\ndef main(length, force):\n    return {}\n"
    )
    page.get_by_role("button", name="Build and publish").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("ValidationError")
    expect(alert).to_contain_text("line 1")
    expect(page.get_by_text("Refused at line 1.")).to_be_visible()
    _no_axe_violations(page)
    # The same page builds what the server accepts.
    page.get_by_label("Code (main.py)").fill(
        "def main(length, force):\n    return {'moment': force * length}\n"
    )
    page.get_by_role("button", name="Build and publish").click()
    expect(page.get_by_role("status")).to_contain_text("Built wd-risky 1.0.0")


def test_organizations_members_roles_and_a_new_workflow(
    platform: InProcessPlatform, runs: Runs, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice", path="/ui/organizations")
    create = page.get_by_role("form", name="Create an organization")
    create.get_by_label("Slug").fill("wd-team")
    create.get_by_label("Name").fill("WD team")
    create.get_by_role("button", name="Create organization").click()
    expect(page.get_by_role("heading", name="Organization WD team")).to_be_visible()
    members = page.get_by_role("table", name="Members")
    expect(members).to_contain_text("alice")
    expect(page.get_by_label("Role of alice")).to_have_value("owner")
    # bob (signed in once: a user exists from then), not a member, is refused and told so.
    bob = new_page()
    sign_in(bob, platform.base_url, "bob", path="/ui/organizations/wd-team")
    expect(bob.get_by_role("alert")).to_contain_text(
        re.compile(r"denied|permission|member|no organization", re.IGNORECASE)
    )

    add = page.get_by_role("form", name="Add a member")
    add.get_by_label("Username").fill("bob")
    add.get_by_role("button", name="Add member").click()
    expect(page.get_by_role("status")).to_contain_text("bob added as member.")
    page.get_by_label("Role of bob").select_option("owner")
    expect(page.get_by_role("status")).to_contain_text("bob is now owner.")
    expect(page.get_by_label("Role of bob")).to_have_value("owner")
    _no_axe_violations(page)
    page.get_by_role("button", name="Remove bob").click()
    expect(page.get_by_role("status")).to_contain_text("bob was removed.")
    expect(members).not_to_contain_text("bob")

    # A new workflow as a copy of another opens in the editor with its nodes.
    page.goto(platform.base_url + "/ui/workflows")
    page.get_by_role("link", name="New workflow").click()
    page.get_by_label("Slug (its address)").fill("wd-copy")
    page.get_by_label("Start from").select_option("wd-chain")
    _no_axe_violations(page)
    page.get_by_role("button", name="Create workflow").click()
    expect(page.get_by_role("heading", name="wd-copy — editor")).to_be_visible()
    expect(page.locator('[data-node-key="b"]')).to_have_count(1)


PAGES = [
    ("/ui/workflows", "Workflows"),
    ("/ui/runs", "Runs"),
    ("/ui/packages", "Packages"),
    ("/ui/functions", "Functions"),
    ("/ui/jobs", "Jobs"),
    ("/ui/organizations", "Organizations"),
    ("/ui/workflows/new", "New workflow"),
    ("/ui/publish", "Publish a package"),
    ("/ui/publish/function", "Publish a function"),
    (f"/ui/workflows/{DEMO_SLUG}/run", "Start a run of Cantilever check"),
    (f"/ui/workflows/{DEMO_SLUG}", "Cantilever check — editor"),
]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_has_a_title_a_favicon_and_no_axe_violation(
    platform: InProcessPlatform, runs: Runs, new_page: Any, scheme: str
) -> None:
    page = new_page()
    page.emulate_media(color_scheme=scheme)
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    sign_in(page, platform.base_url, "alice", path="/ui/workflows")
    background = page.evaluate("() => getComputedStyle(document.documentElement).backgroundColor")
    assert (background == "rgb(18, 22, 28)") == (scheme == "dark"), background
    for path, title in PAGES:
        page.goto(platform.base_url + path)
        expect(page.get_by_role("heading", level=1)).to_contain_text(title.split(" — ")[0])
        expect(page).to_have_title(f"{title} · calcgraph")
        page.wait_for_load_state("networkidle")
        _no_axe_violations(page)
    for path in (f"/ui/runs/{runs.demo}", f"/ui/runs/{runs.failed}"):
        page.goto(platform.base_url + path)
        expect(page.get_by_role("heading", name=re.compile(r"^Run "))).to_be_visible()
        _no_axe_violations(page)
    page.goto(platform.base_url + "/ui/signin")
    _no_axe_violations(page)
    assert not missing, missing
    # GraphiQL links back to the app.
    page.goto(platform.base_url + "/graphql")
    page.get_by_role("link", name="← calcgraph app").click()
    page.wait_for_url(re.compile(r"/ui/"))
