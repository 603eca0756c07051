"""A package's Deployment tab (issue 26, contract 11) in a real browser: a running canary's
state, split and figures as a chart, the history; Promote and Roll back only for those the
server allows (another user sees the tab without them); 0 axe violations."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from calcgraph.demo.platform import InProcessPlatform
from tests.web import workday
from tests.web.conftest import sign_in

PKG = "dt-canary"


def _body(version: str, canary: dict[str, Any] | None = None) -> dict[str, Any]:
    package: dict[str, Any] = {"name": PKG, "version": version}
    if canary is not None:
        package["deployment"] = {"strategy": "canary", "canary": canary}
    return {
        "manifest": {
            "kind": "package",
            "version": 1,
            "package": package,
            "functions": {
                "run": {
                    "handler": "main:run",
                    "inputs": {"x": {"type": "Float", "required": True}},
                    "outputs": {"y": {"type": "Float"}},
                }
            },
        },
        "files": {"main.py": f"def run(x):\n    return {{'y': x + {version[0]}}}\n"},
        "visibility": "public",
    }


@pytest.fixture(scope="module")
def package_id(platform: InProcessPlatform) -> str:
    headers = {"Authorization": f"Bearer {platform.token('alice')}"}
    with httpx.Client(base_url=platform.base_url, headers=headers, timeout=120) as http:
        assert http.post("/packages", json=_body("1.0.0")).status_code == 201
        canary = {
            "traffic_split": {"1.0.0": 70, "2.0.0": 30},
            "duration": "1h",
            "success_criteria": {"error_rate_max": "5%", "latency_p95_max": 5000},
        }
        report = http.post("/packages", json=_body("2.0.0", canary))
        assert report.status_code == 201, report.text
        for x in range(12):
            done = http.post(
                f"/packages/{PKG}/functions/run/execute",
                params={"wait": 60},
                json={"inputs": {"x": x}},
            )
            assert done.status_code == 200, done.text
        pid: str = report.json()["package_id"]
        return pid


def test_the_deployment_tab_shows_the_canary_and_its_owner_rolls_it_back(
    platform: InProcessPlatform, package_id: str, new_page: Any
) -> None:
    base = platform.base_url
    # Another user sees the canary, without the buttons.
    other = new_page()
    sign_in(other, base, "bob", path=f"/ui/packages/{package_id}?tab=deployment")
    expect(other.get_by_role("heading", name="Deployment")).to_be_visible()
    expect(other.get_by_role("tab", name="Deployment")).to_have_attribute("aria-selected", "true")
    expect(other.get_by_role("img", name=re.compile("Candidate 2.0.0"))).to_be_visible()
    expect(other.get_by_role("button", name=re.compile("Promote"))).to_have_count(0)
    expect(other.get_by_role("button", name="Roll back")).to_have_count(0)

    page = new_page()
    sign_in(page, base, "alice", path=f"/ui/packages/{package_id}")
    page.get_by_role("tab", name="Deployment").click()
    expect(page).to_have_url(re.compile(r"\?tab=deployment$"))
    facts = page.locator("dl.facts")
    expect(facts).to_contain_text("canary")
    expect(facts).to_contain_text("1.0.0")
    chart = page.get_by_role("img", name=re.compile("Candidate 2.0.0"))
    expect(chart).to_have_attribute(
        "aria-label", re.compile(r"1\.0\.0: 70% asked, \d+ of 12 calls")
    )
    expect(page.get_by_role("table")).to_contain_text("canary started")
    expect(page.get_by_role("button", name="Promote 2.0.0")).to_be_visible()
    violations = workday.axe_violations(page)
    assert violations == [], violations

    # Declining the confirmation changes nothing; accepting ends the canary, 1.0.0 kept.
    roll_back = page.get_by_role("button", name="Roll back")
    page.once("dialog", lambda dialog: dialog.dismiss())
    roll_back.click()
    expect(facts).to_contain_text("canary")
    page.once("dialog", lambda dialog: dialog.accept())
    roll_back.click()
    expect(facts).to_contain_text("stable")
    expect(page.get_by_role("img", name=re.compile("Candidate"))).to_have_count(0)
    expect(page.get_by_role("table")).to_contain_text("rolled back by alice")
    violations = workday.axe_violations(page)
    assert violations == [], violations
