"""The Webhooks page (issue 23) in a real browser: create one (the secret shown once, copied),
a refused destination shown as the server says it, send a test event to a receiver on loopback
and read its delivery with the status code, a failing receiver's retry, disable, delete after a
confirmation; axe-core finds nothing; bob never sees alice's webhooks."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import expect

from calcgraph.demo.platform import InProcessPlatform
from tests.events.receiver import receiver
from tests.web import workday
from tests.web.conftest import sign_in


def _deliveries_show(page: Any, text: str) -> None:
    """Refresh the deliveries page until its table holds `text` (deliveries run on workers)."""
    table = page.get_by_role("table", name="Delivery attempts, newest first")
    for _ in range(120):
        if table.count() and text in table.inner_text():
            return
        page.wait_for_timeout(250)
        page.get_by_role("button", name="Refresh").click()
    expect(table).to_contain_text(text)


def test_alice_creates_tests_disables_and_deletes_a_webhook(
    platform: InProcessPlatform, new_page: Any
) -> None:
    base = platform.base_url
    page = new_page()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    sign_in(page, base, "alice")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Webhooks").click()
    expect(page.get_by_role("heading", name="Webhooks", level=1)).to_be_visible()
    expect(page.get_by_text("No webhooks yet")).to_be_visible()
    assert workday.axe_violations(page) == []
    form = page.get_by_role("form", name="Create a webhook")

    # A private address: the server's refusal, as it says it.
    form.get_by_label("URL").fill("http://10.0.0.7/hook")
    form.get_by_role("button", name="Create webhook").click()
    expect(form.get_by_role("alert")).to_contain_text("private")
    expect(page.get_by_role("table", name="Your webhooks")).to_have_count(0)

    with receiver() as ok, receiver("fail") as failing:
        form.get_by_label("URL").fill(ok.url)
        form.get_by_label(re.compile("^Event types")).fill("calcgraph.run.*, calcgraph.build.*")
        form.get_by_label("Description").fill("ops channel")
        form.get_by_role("button", name="Create webhook").click()
        secret_box = page.get_by_role("region", name=f"Signing secret of {ok.url}")
        expect(secret_box).to_contain_text("Shown only now.")
        secret = secret_box.get_by_role("textbox", name="Signing secret").input_value()
        assert secret.startswith("whsec_")
        assert workday.axe_violations(page) == []
        secret_box.get_by_role("button", name="Copy secret").click()
        expect(secret_box.get_by_role("status")).to_have_text("Copied to the clipboard.")
        assert page.evaluate("() => navigator.clipboard.readText()") == secret
        secret_box.get_by_role("button", name="I have stored it").click()
        expect(secret_box).to_have_count(0)
        table = page.get_by_role("table", name="Your webhooks")
        row = table.get_by_role("row").filter(has_text=ok.url)
        expect(row).to_contain_text("calcgraph.run.*, calcgraph.build.*")
        expect(row).to_contain_text("ops channel")
        expect(row).to_contain_text("enabled")
        page.reload()
        expect(table).to_be_visible()
        assert secret not in page.content(), "the secret is shown only once"

        form.get_by_label("URL").fill(failing.url)
        form.get_by_role("button", name="Create webhook").click()
        page.get_by_role("button", name="I have stored it").click()

        # A test event: delivered, with the receiver's status code.
        page.get_by_role("button", name=f"Send test to {ok.url}").click()
        expect(page.get_by_role("status")).to_contain_text(
            f"on its way to {ok.url}", timeout=20_000
        )
        assert ok.wait_for(1), "the receiver got nothing"
        page.get_by_role("link", name=f"Deliveries of {ok.url}").click()
        expect(page.get_by_role("heading", name=f"Deliveries to {ok.url}")).to_be_visible()
        _deliveries_show(page, "delivered")
        attempt = page.get_by_role("row").filter(has_text="calcgraph.webhook.test")
        expect(attempt).to_contain_text("204")
        expect(attempt).to_contain_text(re.compile(r"\d+ ms"))
        assert workday.axe_violations(page) == []

        # A receiver answering 500: the attempt says so and when it is tried again.
        page.get_by_role("link", name="All webhooks").click()
        expect(page.get_by_role("table", name="Your webhooks")).to_contain_text(failing.url)
        page.get_by_role("button", name=f"Send test to {failing.url}").click()
        # The server took the request (an error would show as an alert, named here).
        expect(page.get_by_role("status")).to_contain_text(
            f"on its way to {failing.url}", timeout=20_000
        )
        assert failing.wait_for(1), "the failing receiver got nothing"
        page.get_by_role("link", name=f"Deliveries of {failing.url}").click()
        _deliveries_show(page, "500")
        first = page.get_by_role("row").filter(has_text="500").first
        expect(first).to_contain_text(re.compile("retrying|failed"))

    # Disable, then delete after a confirmation (declining keeps it).
    page.get_by_role("link", name="All webhooks").click()
    row = page.get_by_role("row").filter(has_text=ok.url)
    page.get_by_role("button", name=f"Disable {ok.url}").click()
    expect(row).to_contain_text("disabled")
    expect(page.get_by_role("button", name=f"Enable {ok.url}")).to_be_visible()
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name=f"Delete {ok.url}").click()
    expect(row).to_have_count(1)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Delete {ok.url}").click()
    expect(page.get_by_role("status")).to_contain_text("was deleted")
    expect(page.get_by_role("row").filter(has_text=ok.url)).to_have_count(0)

    # Bob sees none of alice's webhooks, nor their deliveries.
    bob = new_page()
    sign_in(bob, base, "bob", path="/ui/webhooks")
    expect(bob.get_by_text("No webhooks yet")).to_be_visible()
    expect(bob.get_by_text(failing.url)).to_have_count(0)
