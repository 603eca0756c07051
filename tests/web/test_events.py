"""Events in the web app (issue 23) and ticks under overload (issue 24), in a real browser: the
run page ticks when an event says one of its jobs finished (far fewer ticks than blind 2 s
ticking), falls back to 2 s ticks when the socket is blocked, waits out a tick's Retry-After;
the header's notifications list the user's run events live, with an unread count."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.sync_api import expect

from calcgraph.client import Client
from calcgraph.client.errors import Conflict
from calcgraph.demo.platform import InProcessPlatform
from tests.web import workday
from tests.web.conftest import ConsoleWatch, sign_in

EV = "ev-tools"
MANIFEST: dict[str, Any] = {
    "kind": "package",
    "version": 1,
    "package": {"name": EV, "version": "1.0.0"},
    "functions": {
        name: {
            "handler": f"tools:{name}",
            "inputs": {"x": {"type": "Float", "required": True}},
            "outputs": {"y": {"type": "Float"}},
        }
        for name in ("step", "boom", "slow")
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
SLOW_SECONDS = 10
POLL_SECONDS = 2.0


def _graph(second: str) -> dict[str, Any]:
    def fn(key: str, function: str, binding: dict[str, Any]) -> dict[str, Any]:
        return {
            "node_key": key,
            "kind": "function",
            "function": f"{EV}/{function}",
            "input_bindings": {"x": binding},
        }

    return {
        "nodes": [
            {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}},
            fn("first", "step", {"source": "input_node", "input_key": "x", "from_port": "value"}),
            fn("second", second, {"source": "edge", "from_node_key": "first", "from_port": "y"}),
        ]
    }


@pytest.fixture(scope="module")
def workflows(platform: InProcessPlatform) -> None:
    with Client(platform.base_url, token=platform.token("alice")) as client:
        client.publish_package(MANIFEST, {"tools.py": SOURCE})
        client.create_workflow("ev-slow", "Slow", _graph("slow"))
        client.create_workflow("ev-fails", "Fails", _graph("boom"))


def _start(platform: InProcessPlatform, slug: str, x: float) -> str:
    with Client(platform.base_url, token=platform.token("alice")) as client:
        return client.start_run(slug, {"x": x}).id


def _end_alices_runs(platform: InProcessPlatform) -> None:
    """Alice's runs that earlier tests left going are cancelled and over: their last events
    come before the page, not as unread notifications in the middle of a test (a loaded
    machine finished one of them after the menu had been read)."""
    with Client(platform.base_url, token=platform.token("alice")) as client:
        going = client.list_runs(status=["pending", "running"], limit=100).items
        for run in going:
            with contextlib.suppress(Conflict):  # it ended between the list and the cancel
                client.cancel_run(run.id)
            client.run_until_done(run.id, timeout=120)


@dataclass
class Ticks:
    """The tick mutations a page sent, by when they were sent (monotonic seconds)."""

    at: list[float] = field(default_factory=list)

    def on_request(self, request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/graphql"):
            body = request.post_data or ""
            if "mutation Tick" in body:
                self.at.append(time.monotonic())

    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.at, self.at[1:], strict=False)]


@dataclass
class Tolerant:
    """A page whose console may hold the browser's own line for an answer the test made a
    503 (the app handles it; Chromium logs every non-2xx fetch); anything else fails."""

    page: Any
    watch: ConsoleWatch

    def errors(self) -> list[str]:
        return [e for e in self.watch.errors if "status of 503" not in e]


@pytest.fixture
def tolerant_page(browser: Any, platform: InProcessPlatform) -> Iterator[Tolerant]:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    watch = ConsoleWatch(platform.base_url)
    page.on("console", watch.on_console)
    page.on("pageerror", watch.on_page_error)
    tolerant = Tolerant(page, watch)
    yield tolerant
    context.close()
    assert not tolerant.errors(), f"console errors: {tolerant.errors()}"


def _block_socket(page: Any) -> None:
    """The events socket refused as a proxy without WebSocket support would."""
    page.route_web_socket(re.compile(r"/graphql$"), lambda ws: ws.close())


def test_the_run_page_ticks_on_events_far_fewer_ticks_than_every_2_s(
    platform: InProcessPlatform, workflows: None, new_page: Any
) -> None:
    page = new_page()
    ticks = Ticks()
    page.on("request", ticks.on_request)
    run_id = _start(platform, "ev-slow", SLOW_SECONDS)
    sign_in(page, platform.base_url, "alice", path=f"/ui/runs/{run_id}")
    expect(page.locator(".live")).to_have_text("live")
    opened = time.monotonic()
    expect(page.get_by_role("heading", level=1)).to_contain_text("completed", timeout=120_000)
    took = time.monotonic() - opened
    # The slow node alone sleeps SLOW_SECONDS: blind 2 s ticking would have sent at least
    # this many ticks; the event-driven page sends its first tick and one per finished job.
    blind = int(SLOW_SECONDS // POLL_SECONDS)
    assert took >= SLOW_SECONDS - 1
    assert blind >= 5
    assert 1 <= len(ticks.at) <= 3, (len(ticks.at), ticks.gaps())
    page.wait_for_timeout(3000)
    assert len(ticks.at) <= 3, "a terminal run is ticked no more"
    expect(page.locator(".live")).to_have_text("")


def test_with_the_socket_blocked_the_run_page_ticks_every_2_s(
    platform: InProcessPlatform, workflows: None, new_page: Any
) -> None:
    page = new_page()
    _block_socket(page)
    ticks = Ticks()
    page.on("request", ticks.on_request)
    run_id = _start(platform, "ev-slow", 8)
    sign_in(page, platform.base_url, "alice", path=f"/ui/runs/{run_id}")
    expect(page.locator(".live")).to_have_text("ticking every 2 s")
    expect(page.get_by_role("heading", level=1)).to_contain_text("completed", timeout=120_000)
    # 8 s of sleeping, ticked every 2 s after each answer: several ticks, none sooner.
    assert len(ticks.at) >= 3, ticks.at
    assert all(gap >= POLL_SECONDS - 0.1 for gap in ticks.gaps()), ticks.gaps()


def test_a_tick_answered_503_with_retry_after_delays_the_next_tick(
    platform: InProcessPlatform, workflows: None, tolerant_page: Tolerant
) -> None:
    page = tolerant_page.page
    _block_socket(page)  # 2 s ticks: a Retry-After longer than that must show
    ticks = Ticks()
    page.on("request", ticks.on_request)
    answers = [
        # The REST-shaped overload answer (a bounded queue's fast 503).
        {
            "status": 503,
            "headers": {"Retry-After": "5", "Content-Type": "application/json"},
            "body": json.dumps(
                {"detail": "Unavailable: the database is busy; retry the request", "retry_after": 5}
            ),
        },
        # The GraphQL door's overload answer: extensions.retry_after.
        {
            "status": 200,
            "headers": {"Content-Type": "application/json"},
            "body": json.dumps(
                {
                    "data": None,
                    "errors": [
                        {
                            "message": "the database is busy; retry the request",
                            "extensions": {"code": "Unavailable", "retry_after": 4},
                        }
                    ],
                }
            ),
        },
    ]

    def overloaded(route: Any) -> None:
        if "mutation Tick" in (route.request.post_data or "") and answers:
            route.fulfill(**answers.pop(0))
        else:
            route.fallback()

    page.route(re.compile(r"/graphql$"), overloaded)
    run_id = _start(platform, "ev-slow", 1)
    sign_in(page, platform.base_url, "alice", path=f"/ui/runs/{run_id}")
    expect(page.locator(".live")).to_contain_text("server busy: next tick in")
    expect(page.get_by_role("heading", level=1)).to_contain_text("completed", timeout=120_000)
    assert not answers
    gaps = ticks.gaps()
    assert gaps[0] >= 5.0, gaps  # Retry-After: 5 (header), not the 2 s poll
    assert gaps[1] >= 4.0, gaps  # extensions.retry_after: 4
    expect(page.get_by_role("alert")).to_have_count(0)


def test_notifications_list_the_users_run_events_live_with_an_unread_count(
    platform: InProcessPlatform, workflows: None, new_page: Any
) -> None:
    _end_alices_runs(platform)
    page = new_page()
    sign_in(page, platform.base_url, "alice")
    menu = page.get_by_role("button", name=re.compile(r"^Notifications"))
    expect(menu).to_be_visible()
    # Open once: whatever was there is read now.
    menu.click()
    panel = page.get_by_role("region", name="Recent notifications")
    expect(panel).to_be_visible()
    page.keyboard.press("Escape")
    expect(panel).to_have_count(0)
    expect(menu).to_have_accessible_name("Notifications")

    # A run of hers fails elsewhere (the API): the menu counts it without a reload.
    run_id = _start(platform, "ev-fails", 1)
    with Client(platform.base_url, token=platform.token("alice")) as client:
        client.run_until_done(run_id, timeout=120)
    # At least this run's failure is unread (runs of the module's earlier tests may end late
    # on a loaded machine and count too).
    unread = re.compile(r"^Notifications [1-9][0-9]* unread$")
    expect(menu).to_have_accessible_name(unread, timeout=30_000)
    menu.click()
    link = panel.get_by_role("link", name=f"Run {run_id[:8]} of ev-fails failed at second")
    expect(link).to_be_visible()
    expect(panel.locator(".notice.fresh").filter(has_text=f"Run {run_id[:8]} of")).to_have_count(1)
    assert workday.axe_violations(page) == []
    # Read once the menu closes: following the link closes it.
    expect(menu).to_have_accessible_name(unread)
    link.click()
    expect(menu).to_have_accessible_name("Notifications")
    page.wait_for_url(re.compile(rf"/ui/runs/{run_id}$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text("failed")
    # Read in this tab is read after a reload too.
    page.reload()
    expect(menu).to_have_accessible_name("Notifications")

    # Bob's menu never shows alice's run.
    bob = new_page()
    sign_in(bob, platform.base_url, "bob")
    bob.get_by_role("button", name=re.compile(r"^Notifications")).click()
    bob_panel = bob.get_by_role("region", name="Recent notifications")
    expect(bob_panel).to_be_visible()
    expect(bob_panel).not_to_contain_text(run_id[:8])
