"""The web app when the server says "wait" (429 `RateLimited` with `Retry-After`): a page loads
a moment later instead of showing the refusal to someone who can only press a button, and a
mutation refused before its body was read is sent again once, not lost and not doubled.

The rate limit is the server's own (in memory, per user); the database plays no part, so the
platform here is SQLite's alone."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from calcgraph import webui
from calcgraph.demo.platform import InProcessPlatform
from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS, sign_in, web_settings


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessPlatform]:
    if not (webui.DIST / "index.html").is_file():
        pytest.fail("the web app is not built: run `make install` (or `make web`)")
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('busy') / 'web.db'}"
    # One request a second per user, in bursts of 8: a test can empty the bucket.
    settings = web_settings(url, rate_limit_per_minute=60, rate_limit_burst=8)
    with InProcessPlatform(settings) as running:
        yield running


@pytest.fixture
def page(platform: InProcessPlatform) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        opened = context.new_page()
        opened.set_default_timeout(20_000)
        yield opened
        browser.close()


@contextmanager
def _bucket_kept_empty(
    platform: InProcessPlatform, username: str, refused: Callable[[], bool]
) -> Iterator[None]:
    """Spend the user's burst from outside the browser until the server refuses, then keep
    spending each token it gives back (one a second) until the browser has been refused
    (`refused`): a slow machine's second between emptying the bucket and the page's request
    cannot let that request through. Once the browser was refused, its retry may pass."""
    headers = {"Authorization": f"Bearer {platform.token(username)}"}
    emptied = threading.Event()
    done = threading.Event()
    problems: list[str] = []

    def spend() -> None:
        with httpx.Client(base_url=platform.base_url, headers=headers) as http:
            for _ in range(50):
                answer = http.post("/graphql", json={"query": "{ me { username } }"})
                if answer.status_code == 429:
                    if not answer.headers.get("Retry-After"):
                        problems.append("a 429 without Retry-After")
                    break
            else:
                problems.append("the rate limit never refused")
            emptied.set()
            while not done.is_set() and not refused():
                http.post("/graphql", json={"query": "{ me { username } }"})

    spender = threading.Thread(target=spend, daemon=True)
    spender.start()
    assert emptied.wait(30), "the bucket was not emptied within 30 s"
    assert not problems, problems
    try:
        yield
    finally:
        done.set()
        spender.join(30)


def test_a_page_waits_out_a_rate_limit_and_a_refused_mutation_is_sent_once(
    platform: InProcessPlatform, page: Any
) -> None:
    statuses: list[tuple[str, int]] = []
    page.on("response", lambda r: statuses.append((r.request.method, r.status)))
    sign_in(page, platform.base_url, "alice")
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    page.wait_for_load_state("networkidle")

    # A page's query refused with 429: the app waits as asked and shows the page.
    statuses.clear()
    with _bucket_kept_empty(platform, "alice", lambda: ("POST", 429) in statuses):
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Webhooks").click()
        expect(page.get_by_text("No webhooks yet")).to_be_visible(timeout=20_000)
    expect(page.get_by_role("alert")).to_have_count(0)
    assert ("POST", 429) in statuses, f"the server never refused the page: {statuses}"

    # A mutation refused before its body was read: sent again, and done once.
    form = page.get_by_role("form", name="Create a webhook")
    form.get_by_label("URL").fill("http://127.0.0.1:9/hook")
    statuses.clear()
    with _bucket_kept_empty(platform, "alice", lambda: ("POST", 429) in statuses):
        form.get_by_role("button", name="Create webhook").click()
        page.get_by_role("button", name="I have stored it").click(timeout=20_000)
    table = page.get_by_role("table", name="Your webhooks")
    expect(table.get_by_role("row").filter(has_text="http://127.0.0.1:9/hook")).to_have_count(
        1, timeout=20_000
    )
    assert ("POST", 429) in statuses, f"the server never refused the mutation: {statuses}"
    expect(page.get_by_role("alert")).to_have_count(0)
