"""The run page and a node whose outputs the server left out of the run (issue 28; contract 8b:
a value over 64 KiB is left out of listings, `outputs_omitted`, and read whole through the job):
the node's details say so, link the job, and read the whole outputs on request."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from calcgraph.client import Client
from calcgraph.demo.platform import InProcessPlatform
from tests.web import workday
from tests.web.conftest import sign_in

SIZE = 100_000  # characters: over 64 KiB
MANIFEST: dict[str, Any] = {
    "kind": "package",
    "version": 1,
    "package": {"name": "wd-big", "version": "1.0.0"},
    "functions": {
        "big": {
            "handler": "big:big",
            "inputs": {"x": {"type": "Float", "required": True}},
            "outputs": {"text": {"type": "String"}, "size": {"type": "Float"}},
        }
    },
}
SOURCE = f"def big(x):\n    return {{'text': 'head-' + 'v' * {SIZE} + '-tail', 'size': x}}\n"
GRAPH = {
    "nodes": [
        {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
        {
            "node_key": "big",
            "kind": "function",
            "function": "wd-big/big",
            "input_bindings": {
                "x": {"source": "input_node", "input_key": "x", "from_port": "value"}
            },
        },
    ]
}


@pytest.fixture(scope="module")
def big_run(platform: InProcessPlatform) -> Iterator[str]:
    with Client(platform.base_url, token=platform.token("alice")) as client:
        client.publish_package(MANIFEST, {"big.py": SOURCE})
        client.create_workflow("wd-big", "Big outputs", GRAPH)
        run = client.start_run("wd-big", {"x": 1}).id
        client.run_until_done(run, timeout=240)
        yield run


def test_a_node_whose_outputs_were_left_out_says_so_and_reads_them_whole(
    platform: InProcessPlatform, big_run: str, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice", path=f"/ui/runs/{big_run}?node=big")
    expect(page.get_by_role("heading", name=re.compile(r"^Run .* completed$"))).to_be_visible()
    details = page.get_by_label("Node details")
    expect(details.get_by_role("heading", name=re.compile("^big"))).to_be_visible()
    # Left out of the run, and said so: no outputs table, a note, the job's link.
    expect(details).to_contain_text("Outputs left out of the run")
    expect(details.get_by_role("table", name="Outputs")).to_have_count(0)
    job_link = details.get_by_role("link", name="The job")
    expect(job_link).to_have_attribute("href", re.compile(r"/ui/jobs/[0-9a-f-]{36}$"))
    workday_violations = workday.axe_violations(page)
    assert workday_violations == [], workday_violations

    # Read whole through the job, on request.
    details.get_by_role("button", name="Read the whole outputs").click()
    outputs = details.get_by_role("table", name="Outputs")
    expect(outputs).to_contain_text("head-vvvv")
    expect(outputs).to_contain_text("-tail")
    text = outputs.get_by_role("row", name=re.compile("^text")).inner_text()
    assert text.count("v") >= SIZE, len(text)
    expect(details.get_by_role("button", name="Read the whole outputs")).to_have_count(0)
    assert workday.axe_violations(page) == []

    # The job's own page shows them whole too.
    job_link.click()
    expect(page).to_have_url(re.compile(r"/ui/jobs/"))
    expect(page.get_by_text(re.compile("-tail"))).not_to_have_count(0)
