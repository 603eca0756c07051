"""Screenshots of every page of the web app at 1440x900, for docs/screenshots/.

    .venv/bin/python scripts/web_screenshots.py docs/screenshots

Starts the real platform (SQLite in a temporary directory, the development identity provider),
publishes the demo as alice, runs it and a failing workflow, then drives Debian's chromium through
the pages a person uses, once in light and once in dark mode (`name.png`, `name-dark.png`).
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

# The sign-in steps and the demo's inputs are the end-to-end tests' own (tests/web).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from playwright.sync_api import expect, sync_playwright

from calcgraph.client import Client
from calcgraph.demo.platform import InProcessPlatform
from calcgraph.settings import Settings
from tests.events.receiver import Receiver, receiver
from tests.web import test_run_control as run_control
from tests.web import workday
from tests.web.conftest import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DEMO_SLUG,
    _publish_demo,
    sign_in,
)
from tests.web.test_deployment_tab import PKG as DEPLOYMENT_PKG
from tests.web.test_deployment_tab import _body as deployment_body
from tests.web.test_e2e import RUN_INPUTS
from tests.web.test_workday import DEMO_INPUTS


def _demo_files() -> Path:
    """The demo package's folder (calcgraph.yaml and its modules)."""
    return Path(__file__).resolve().parents[1] / "calcgraph" / "demo" / "package"


def _runs(platform: InProcessPlatform) -> tuple[str, str, str, str]:
    """A completed demo run, a failed one (the working-day tests' workflow) and one whose node
    was tried 3 times (the run control tests' workflow), by the API; and an organization."""
    with Client(platform.base_url, token=platform.token("alice")) as client:
        client.publish_package(workday.MANIFEST, {"tools.py": workday.SOURCE})
        client.create_workflow("wd-fails", "Fails", workday.failing())
        client.publish_package(run_control.MANIFEST, {"tools.py": run_control.SOURCE})
        client.create_workflow("rc-retried", "Retried", run_control._retried())
        client.create_workflow("rc-slow", "Slow", run_control._graph("slow"))
        client.create_organization("structures", "Structures team")
        demo = client.start_run(DEMO_SLUG, DEMO_INPUTS).id
        failed = client.start_run("wd-fails", {"x": 1}).id
        retried = client.start_run("rc-retried", {"x": 1}).id
        for run in (demo, failed, retried):
            client.run_until_done(run, timeout=240)
        # Still running (its second node sleeps 15 minutes) while the pages are shot: Cancel.
        slow = client.start_run("rc-slow", {"x": 900}).id
    return demo, failed, retried, slow


def _canary(platform: InProcessPlatform) -> str:
    """A package with a running canary and some calls shared by its split (the Deployment
    tab's test's package), for the Deployment tab."""
    headers = {"Authorization": f"Bearer {platform.token('alice')}"}
    with httpx.Client(base_url=platform.base_url, headers=headers, timeout=120) as http:
        http.post("/packages", json=deployment_body("1.0.0")).raise_for_status()
        canary = {
            "traffic_split": {"1.0.0": 70, "2.0.0": 30},
            "duration": "1h",
            "success_criteria": {"error_rate_max": "5%", "latency_p95_max": 5000},
        }
        report = http.post("/packages", json=deployment_body("2.0.0", canary))
        report.raise_for_status()
        for x in range(20):
            http.post(
                f"/packages/{DEPLOYMENT_PKG}/functions/run/execute",
                params={"wait": 60},
                json={"inputs": {"x": x}},
            ).raise_for_status()
        pid: str = report.json()["package_id"]
        return pid


def _webhooks(platform: InProcessPlatform, ok: Receiver, failing: Receiver) -> str:
    """Two of alice's webhooks, each sent a test event (one receiver answers 500); the failing
    one's id."""
    with Client(platform.base_url, token=platform.token("alice")) as client:
        good = client.create_webhook(ok.url, ["calcgraph.run.*"], "run notifications to ops")
        bad = client.create_webhook(failing.url, ["calcgraph.build.refused"], "refused builds")
        for hook in (good, bad):
            client.test_webhook(hook.id)
        ok.wait_for(1)
        failing.wait_for(1)
        return bad.id


def _event_pages(context: Any, base: str, out: Path, suffix: str, failing_hook: str) -> None:
    """The notifications menu (the runs above as its unread events) and the Webhooks page with
    a new webhook's secret shown once, and a failing webhook's deliveries."""
    page = context.new_page()

    def shot(name: str) -> None:
        page.wait_for_timeout(500)
        page.screenshot(path=str(out / f"{name}{suffix}.png"))

    page.goto(f"{base}/ui/runs")
    menu = page.get_by_role("button", name=re.compile(r"^Notifications"))
    expect(menu).to_have_accessible_name(re.compile(r"unread"))
    menu.click()
    expect(page.get_by_role("region", name="Recent notifications")).to_be_visible()
    shot("notifications")
    page.keyboard.press("Escape")

    page.goto(f"{base}/ui/webhooks")
    form = page.get_by_role("form", name="Create a webhook")
    url = "http://127.0.0.1:9/screenshots"
    form.get_by_label("URL").fill(url)
    form.get_by_label(re.compile("^Event types")).fill("calcgraph.run.failed, calcgraph.build.*")
    form.get_by_label("Description").fill("nightly failures")
    form.get_by_role("button", name="Create webhook").click()
    expect(page.get_by_role("region", name=f"Signing secret of {url}")).to_be_visible()
    shot("webhooks")
    page.get_by_role("button", name="I have stored it").click()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Delete {url}").click()
    expect(page.get_by_role("row").filter(has_text=url)).to_have_count(0)

    page.goto(f"{base}/ui/webhooks/{failing_hook}")
    expect(page.get_by_role("table", name="Delivery attempts, newest first")).to_contain_text("500")
    shot("webhook-deliveries")
    page.close()


def _pages(
    context: Any,
    base: str,
    out: Path,
    suffix: str,
    demo: str,
    failed: str,
    retried: str,
    canary: str,
    slow: str,
) -> None:
    page = context.new_page()

    def shot(name: str, on: Any = None) -> None:
        target = on or page
        target.wait_for_timeout(500)
        target.screenshot(path=str(out / f"{name}{suffix}.png"))

    page.goto(base + "/ui/signin")
    shot("signin")
    sign_in(page, base, "alice")
    # The token lives in each tab's sessionStorage (contract 8b): the pages opened below get
    # this tab's session before the app's scripts run.
    session = page.evaluate("() => sessionStorage.getItem('calcgraph.session')")
    context.add_init_script(f"sessionStorage.setItem('calcgraph.session', {json.dumps(session)})")
    shot("workflows")

    # Pages of their own: headless chromium leaves React Flow's nodes unpainted in a
    # screenshot of a page that was already screenshotted.
    editor = context.new_page()
    editor.goto(f"{base}/ui/workflows/{DEMO_SLUG}")
    expect(editor.locator('[data-node-key="verdict"]')).to_be_visible()
    editor.get_by_label("From port").select_option("load.value")
    editor.get_by_label("To port").select_option("beam.length")
    editor.get_by_role("button", name="Connect", exact=True).click()
    expect(editor.get_by_test_id("editor-message")).to_contain_text("refused")
    shot("editor", editor)
    editor.close()
    editor = context.new_page()
    editor.goto(f"{base}/ui/workflows/rc-retried")
    editor.locator('[data-node-key="second"]').click()
    expect(editor.get_by_role("form", name="Retry policy of second")).to_be_visible()
    shot("editor-retry", editor)
    editor.close()

    run = context.new_page()
    run.goto(f"{base}/ui/runs/{demo}?node=beam")
    expect(run.get_by_role("heading", name=re.compile(r"^Run .* completed$"))).to_be_visible()
    expect(run.locator(".react-flow__edge").first).to_be_visible()
    shot("run", run)
    run.close()
    run = context.new_page()
    run.goto(f"{base}/ui/runs/{failed}")
    expect(run.get_by_role("heading", name=re.compile(r"^Run .* failed$"))).to_be_visible()
    run.get_by_label("Node details").locator("summary").click()
    shot("run-failed", run)
    run.close()
    # Re-run from failure on a page of its own (see above): the new run, its reused nodes kept.
    run = context.new_page()
    run.goto(f"{base}/ui/runs/{failed}")
    run.get_by_role("button", name="Re-run from failure").click()
    run.wait_for_url(re.compile(r"/ui/runs/(?!" + failed + r")[0-9a-f-]+"))
    expect(run.get_by_role("heading", name=re.compile(r"^Run .* failed$"))).to_be_visible(
        timeout=60_000
    )
    shot("run-rerun", run)
    # Run again: the start form filled in with the run's inputs.
    run.get_by_role("button", name="Run again").click()
    run.wait_for_url(re.compile(r"/ui/workflows/[^/]+/run$"))
    shot("run-again", run)
    run.close()
    run = context.new_page()
    run.goto(f"{base}/ui/runs/{slow}?node=second")
    expect(run.get_by_role("button", name="Cancel", exact=True)).to_be_visible()
    shot("run-cancel", run)
    run.close()
    run = context.new_page()
    run.goto(f"{base}/ui/runs/{retried}?node=second")
    expect(run.get_by_role("table", name="Attempts")).to_be_visible()
    shot("run-attempts", run)
    run.get_by_role("list", name="Timeline").scroll_into_view_if_needed()
    shot("run-attempts-timeline", run)
    run.close()

    page.goto(f"{base}/ui/workflows/{DEMO_SLUG}/run")
    for name, value in RUN_INPUTS.items():
        page.get_by_label(re.compile(rf"^{name} ")).fill(value)
    shot("start-run")
    page.goto(base + "/ui/runs")
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    expect(page.get_by_role("table")).to_be_visible()
    shot("runs")
    page.goto(base + "/ui/packages")
    page.get_by_role("link", name="demo-beam").click()
    expect(page.get_by_role("heading", name="Versions and changelog")).to_be_visible()
    shot("package")
    page.goto(f"{base}/ui/packages/{canary}?tab=deployment")
    expect(page.get_by_role("img", name=re.compile("Candidate 2.0.0"))).to_be_visible()
    shot("package-deployment")
    page.goto(base + "/ui/functions")
    expect(page.get_by_role("link", name="cantilever")).to_be_visible()
    shot("functions")
    page.get_by_role("link", name="cantilever").click()
    page.get_by_label(re.compile(r"^length ")).fill("3 m")
    page.get_by_label(re.compile(r"^force ")).fill("12 kN")
    page.get_by_label(re.compile(r"^youngs_modulus ")).fill("210 GPa")
    page.get_by_label(re.compile(r"^second_moment ")).fill("8.356e-5")
    page.get_by_role("button", name="Run function").click()
    expect(page.get_by_role("heading", name=re.compile("^Job"))).to_be_visible(timeout=60_000)
    shot("function")
    page.goto(base + "/ui/jobs")
    expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    expect(page.get_by_role("table")).to_be_visible()
    shot("jobs")
    page.locator("tbody a").first.click()
    expect(page.get_by_role("heading", name="Logs")).to_be_visible()
    shot("job")
    # The jobs of a run link it; the job page names its run, node and workflow.
    page.goto(base + "/ui/jobs?function=demo-beam%2Fstress_check")
    page.locator("tbody td:first-child a").first.click()
    expect(page.get_by_role("heading", name="Logs")).to_be_visible()
    shot("job-of-run")
    page.goto(base + "/ui/packages")
    expect(page.get_by_role("link", name="demo-beam")).to_be_visible()
    shot("packages")
    page.goto(base + "/ui/workflows/new")
    expect(page.get_by_role("heading", name="New workflow")).to_be_visible()
    shot("new-workflow")
    page.goto(base + "/ui/organizations")
    expect(page.get_by_role("heading", name="Organizations", exact=True)).to_be_visible()
    shot("organizations")
    page.goto(base + "/ui/organizations/structures")
    expect(page.get_by_role("table", name="Members")).to_be_visible()
    shot("organization")
    page.goto(base + "/ui/publish")
    page.get_by_label("Or pick calcgraph.yaml and its modules").set_input_files(
        [str(p) for p in sorted(_demo_files().iterdir()) if p.is_file()]
    )
    expect(page.get_by_role("table", name="What will be sent")).to_contain_text("beam.py")
    shot("publish")
    page.goto(base + "/ui/publish/function")
    page.get_by_label("Name").fill("moment")
    page.get_by_label("Code (main.py)").fill(
        "import os\n\ndef main(length, force):\n    return {'moment': force * length}\n"
    )
    page.get_by_role("button", name="Build and publish").click()
    expect(page.get_by_text("Refused at line 1.")).to_be_visible()
    shot("publish-function")
    page.goto(base + "/graphql")
    expect(page.locator(".graphiql-query-editor")).to_contain_text("username", timeout=30_000)
    page.get_by_role("button", name=re.compile("Execute query")).click()
    expect(page.locator(".graphiql-response")).to_contain_text("alice", timeout=30_000)
    shot("graphiql")
    page.close()


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
            webhook_allowed_hosts=["127.0.0.1"],
        )
        with (
            InProcessPlatform(settings) as platform,
            sync_playwright() as p,
            receiver() as ok,
            receiver("fail") as failing,
        ):
            _publish_demo(platform)
            demo, failed, retried, slow = _runs(platform)
            canary = _canary(platform)
            failing_hook = _webhooks(platform, ok, failing)
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            # Light as `name.png`, dark (prefers-color-scheme) as `name-dark.png`.
            for scheme, suffix in (("light", ""), ("dark", "-dark")):
                context = browser.new_context(
                    viewport={"width": 1440, "height": 900}, color_scheme=scheme
                )
                context.route(
                    "**/*",
                    lambda route: (
                        route.continue_()
                        if "127.0.0.1" in route.request.url.split("/")[2]
                        else route.abort()
                    ),
                )
                _pages(context, platform.base_url, out, suffix, demo, failed, retried, canary, slow)
                _event_pages(context, platform.base_url, out, suffix, failing_hook)
                context.close()
            browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots"))
