"""A package's versions in the web app (issue 26, contract 11): each version's pinned
dependencies with links to the pinned versions, its compatibility, migration guide and
changelog; axe-core finds no WCAG A/AA violation. The package is the docs' example
(docs/packages.md, Dependencies), run once to show the import works as documented."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from calcgraph.client import Client
from calcgraph.demo.platform import InProcessPlatform
from tests.web import workday
from tests.web.conftest import sign_in

SOURCE = (
    "import demo_beam.checks\n"
    "\n"
    "def stiff_enough(deflection, length):\n"
    "    return {'ok': demo_beam.checks.deflection_check(deflection, length) <= 1.0}\n"
)


def manifest(version: str) -> dict[str, Any]:
    return {
        "kind": "package",
        "version": 1,
        "package": {
            "name": "demo-bridge",
            "version": version,
            "dependencies": {"demo-beam": "^1.2"},
            "compatibility": {"compatible_with": [">=1.0.0,<2.0.0"]},
            "migration_guide": "Nothing to do: the interface is unchanged since 1.0.0.",
            "changelog": {
                version: {"date": "2026-11-27", "changes": [{"type": "fix", "description": "x"}]}
            },
        },
        "functions": {
            "stiff_enough": {
                "handler": "span:stiff_enough",
                "inputs": {
                    "deflection": {"type": "Length", "required": True},
                    "length": {"type": "Length", "required": True},
                },
                "outputs": {"ok": {"type": "Boolean"}},
            }
        },
    }


def _no_axe_violations(page: Any) -> None:
    violations = workday.axe_violations(page)
    assert violations == [], f"{page.url}: {violations}"


def test_a_version_shows_its_pins_compatibility_and_migration_guide(
    platform: InProcessPlatform, new_page: Any
) -> None:
    with Client(platform.base_url, token=platform.token("alice")) as client:
        client.publish_package(manifest("1.0.0"), {"span.py": SOURCE})
        report = client.publish_package(manifest("1.1.0"), {"span.py": SOURCE})
        assert report.dependencies == {"demo-beam": "1.2.0"}
        result = client.execute(
            "demo-bridge/stiff_enough", {"deflection": 0.01, "length": 2.0}, wait=60
        )
        assert result.status == "success", result
        assert result.outputs == {"ok": True}
        beam = next(p for p in client.iterate(client.list_packages) if p.name == "demo-beam")

    page = new_page()
    sign_in(page, platform.base_url, "alice", path=f"/ui/packages/{report.package_id}")
    expect(page.get_by_role("heading", name="Package demo-bridge")).to_be_visible()
    latest = page.locator("article#v-1\\.1\\.0")
    expect(latest.get_by_role("table", name="Dependencies as pinned at deployment")).to_be_visible()
    link = latest.get_by_role("link", name="demo-beam 1.2.0")
    expect(link).to_have_attribute("href", f"/ui/packages/{beam.id}#v-1.2.0")
    expect(latest.get_by_text("^1.2", exact=True)).to_be_visible()
    expect(latest.get_by_text(">=1.0.0,<2.0.0")).to_be_visible()
    expect(latest.get_by_text("Nothing to do: the interface is unchanged")).to_be_visible()
    expect(latest.get_by_text("Released 2026-11-27")).to_be_visible()
    # An older version's details load when opened.
    older = page.locator("article#v-1\\.0\\.0")
    expect(older.get_by_role("link", name="demo-beam 1.2.0")).to_have_count(0)
    older.get_by_text("Dependencies, compatibility and migration guide of 1.0.0").click()
    expect(older.get_by_role("link", name="demo-beam 1.2.0")).to_be_visible()
    _no_axe_violations(page)

    # The link opens the pinned version of the dependency on its package's page.
    link.click()
    page.wait_for_url(re.compile(rf"/ui/packages/{beam.id}#v-1\.2\.0$"))
    expect(page.get_by_role("heading", name="Package demo-beam")).to_be_visible()
    pinned = page.locator("article#v-1\\.2\\.0")
    expect(pinned.get_by_text("No dependencies.")).to_be_visible()
    _no_axe_violations(page)
