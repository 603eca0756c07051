"""Screenshots of every page of the web app at 1440x900, for docs/screenshots/.

    .venv/bin/python scripts/web_screenshots.py docs/screenshots

Starts the real platform (SQLite in a temporary directory, the development identity provider),
publishes the demo as alice, then drives Debian's chromium through the pages a person uses.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

# The sign-in steps and the demo's inputs are the end-to-end tests' own (tests/web).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import expect, sync_playwright

from calcgraph.demo.platform import InProcessPlatform
from calcgraph.settings import Settings
from tests.web.conftest import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DEMO_SLUG,
    _publish_demo,
    sign_in,
)
from tests.web.test_e2e import RUN_INPUTS


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            database_url=f"sqlite+aiosqlite:///{tmp}/shots.db",
            sandbox="process",
            oidc_issuer=None,
            redis_url=None,
            oidc_client_id="calcgraph-dev",
            oidc_client_secret="development",
        )
        with InProcessPlatform(settings) as platform, sync_playwright() as p:
            _publish_demo(platform)
            base = platform.base_url
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            context.route(
                "**/*",
                lambda route: (
                    route.continue_()
                    if "127.0.0.1" in route.request.url.split("/")[2]
                    else route.abort()
                ),
            )
            page = context.new_page()

            def shot(name: str) -> None:
                page.wait_for_timeout(400)
                page.screenshot(path=str(out / f"{name}.png"))

            page.goto(base + "/ui/signin")
            shot("signin")
            sign_in(page, base, "alice")
            shot("workflows")

            # A page of its own: headless chromium leaves React Flow's nodes unpainted in a
            # screenshot of a page that was already screenshotted.
            editor = context.new_page()
            editor.goto(f"{base}/ui/workflows/{DEMO_SLUG}")
            expect(editor.locator('[data-node-key="verdict"]')).to_be_visible()
            editor.get_by_label("From port").select_option("load.value")
            editor.get_by_label("To port").select_option("beam.length")
            editor.get_by_role("button", name="Connect", exact=True).click()
            expect(editor.get_by_test_id("editor-message")).to_contain_text("refused")
            editor.wait_for_timeout(1000)
            editor.screenshot(path=str(out / "editor.png"))
            editor.close()

            page.goto(f"{base}/ui/workflows/{DEMO_SLUG}")
            page.get_by_role("link", name="Start a run").click()
            for name, value in RUN_INPUTS.items():
                page.get_by_label(re.compile(rf"^{name} ")).fill(value)
            shot("start-run")
            page.get_by_role("button", name="Start run").click()
            expect(page.get_by_role("heading", name=re.compile(r"completed$"))).to_be_visible(
                timeout=90_000
            )
            page.locator("aside.details select").select_option("strength")
            shot("run")

            page.goto(base + "/ui/runs")
            expect(page.get_by_role("heading", name="Runs")).to_be_visible()
            shot("runs")
            page.goto(base + "/ui/packages")
            page.get_by_role("link", name="demo-beam").click()
            expect(page.get_by_role("heading", name="Versions and changelog")).to_be_visible()
            shot("package")
            page.goto(base + "/ui/functions")
            expect(page.get_by_role("link", name="cantilever")).to_be_visible()
            shot("functions")
            page.get_by_role("link", name="cantilever").click()
            page.get_by_label(re.compile(r"^length ")).fill("3 m")
            page.get_by_label(re.compile(r"^force ")).fill("12 kN")
            page.get_by_label(re.compile(r"^youngs_modulus ")).fill("210 GPa")
            page.get_by_label(re.compile(r"^second_moment ")).fill("8.356e-5")
            page.get_by_role("button", name="Run function").click()
            expect(page.get_by_role("heading", name=re.compile("^Job"))).to_be_visible(
                timeout=60_000
            )
            shot("function")
            page.goto(base + "/ui/jobs")
            expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
            shot("jobs")
            page.locator("tbody a").first.click()
            expect(page.get_by_role("heading", name="Logs")).to_be_visible()
            shot("job")
            page.goto(base + "/graphql")
            expect(page.locator(".graphiql-query-editor")).to_contain_text(
                "username", timeout=30_000
            )
            page.get_by_role("button", name=re.compile("Execute query")).click()
            expect(page.locator(".graphiql-response")).to_contain_text("alice", timeout=30_000)
            shot("graphiql")
            browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots"))
