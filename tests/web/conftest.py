"""The web app end to end: the real server (InProcessPlatform: uvicorn, in-process workers, the
development identity provider) driven by Playwright in Debian's chromium."""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from calcgraph import webui
from calcgraph.client import Client
from calcgraph.demo import package_files, workflow_document
from calcgraph.demo.platform import InProcessPlatform
from calcgraph.settings import Settings
from tests.conftest import POSTGRES_URL, _reset_postgres
from tests.execution.conftest import quick_sandbox

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DEMO_SLUG = "cantilever-check"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/web/" in str(item.fspath):
            if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
                item.add_marker(pytest.mark.skip(reason=f"no chromium at {CHROMIUM}"))


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[InProcessPlatform]:
    if not (webui.DIST / "index.html").is_file():
        pytest.fail("the web app is not built: run `make install` (or `make web`)")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('web') / 'web.db'}"
    else:
        url = f"{POSTGRES_URL}_web"
        asyncio.run(_reset_postgres(url))
    with InProcessPlatform(web_settings(url)) as running:
        _publish_demo(running)
        yield running


def web_settings(database_url: str, **overrides: Any) -> Settings:
    """The web tests' platform: quick sandboxes, the development provider, no Redis."""
    return Settings(
        database_url=database_url,
        sandbox=quick_sandbox(),
        oidc_issuer=None,
        redis_url=None,
        # The platform names its own provider's issuer, so name its client as `serve` does.
        oidc_client_id="calcgraph-dev",
        oidc_client_secret="development",
        # The Webhooks page's tests deliver to a receiver on loopback.
        webhook_allowed_hosts=["127.0.0.1"],
        **overrides,
    )


def _publish_demo(platform: InProcessPlatform) -> None:
    """alice publishes the demo package and its workflow (private: hers alone)."""
    with Client(platform.base_url, token=platform.token("alice")) as client:
        files = package_files()
        manifest: dict[str, Any] = yaml.safe_load(files.pop("calcgraph.yaml"))
        client.publish_package(manifest, files)
        client.create_workflow(DEMO_SLUG, "Cantilever check", workflow_document())


@dataclass
class ConsoleWatch:
    """Console errors and uncaught exceptions of the app's own pages."""

    origin: str
    errors: list[str] = field(default_factory=list)

    def on_console(self, message: Any) -> None:
        if message.type != "error":
            return
        url = (message.location or {}).get("url", "")
        if url and not url.startswith(self.origin):
            return  # the identity provider's page (its stylesheet is on a CDN we block)
        self.errors.append(f"{message.text} ({url})")

    def on_page_error(self, error: Any) -> None:
        self.errors.append(f"uncaught: {error}")


@pytest.fixture(scope="module")
def browser(platform: InProcessPlatform) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def new_page(browser: Any, platform: InProcessPlatform) -> Iterator[Any]:
    """`new_page()` opens a page in a fresh context (its own storage: one person); every
    request off the machine is refused, and the test fails on a console error of the app."""
    contexts: list[Any] = []
    watches: list[ConsoleWatch] = []
    local = {urlsplit(platform.base_url).hostname, "127.0.0.1", "localhost"}

    def open_page() -> Any:
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        context.route(
            "**/*",
            lambda route: (
                route.continue_()
                if urlsplit(route.request.url).hostname in local
                else route.abort()
            ),
        )
        page = context.new_page()
        page.set_default_timeout(20_000)
        watch = ConsoleWatch(platform.base_url)
        page.on("console", watch.on_console)
        page.on("pageerror", watch.on_page_error)
        contexts.append(context)
        watches.append(watch)
        return page

    yield open_page
    for context in contexts:
        context.close()
    errors = [e for w in watches for e in w.errors]
    assert not errors, f"console errors: {errors}"


def sign_in(page: Any, base_url: str, username: str, path: str = "/ui/") -> None:
    """Through the app's button, the provider's page (pick the user), back to the app."""
    page.goto(base_url + path)
    page.get_by_role("button", name="Sign in with your organisation").click()
    page.get_by_role("button", name=username, exact=True).click()
    page.wait_for_url(re.compile(r"/ui/(?!callback|signin)"))
    page.get_by_label("Signed in as").filter(has_text=username).wait_for()
