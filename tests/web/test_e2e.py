"""What a person does with the web app, in a real browser (issue 13, "Must show")."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import expect

from calcgraph.demo.platform import InProcessPlatform
from tests.web.conftest import DEMO_SLUG, sign_in

RUN_INPUTS = {
    "span": "3 m",
    "load": "12 kN",
    "youngs_modulus": "210 GPa",
    "second_moment": "8.356e-5",
    "section_modulus": "557 cm**3",
    "yield_stress": "355 MPa",
}


def _alice_runs_the_demo(page: Any, base: str) -> str:
    sign_in(page, base, "alice")
    page.get_by_role("link", name=DEMO_SLUG, exact=True).click()
    expect(page.get_by_role("heading", name="Cantilever check — editor")).to_be_visible()
    expect(page.locator('[data-node-key="verdict"]')).to_be_visible()

    # An edge the catalog refuses: a Force cannot feed a Length; the reason names the chain.
    page.get_by_label("From port").select_option("load.value")
    page.get_by_label("To port").select_option("beam.length")
    page.get_by_role("button", name="Connect", exact=True).click()
    refusal = page.get_by_test_id("editor-message")
    expect(refusal).to_contain_text("Edge refused: load.value (Force) → beam.length (Length)")
    expect(refusal).to_contain_text("Force")

    # The validation report shows on the node it names; discarding brings the saved graph back.
    page.get_by_label("Function to add").select_option("demo-beam/verdict")
    page.get_by_label("Key of the new function").fill("extra")
    page.get_by_role("button", name="Add function").click()
    page.get_by_role("button", name="Validate").click()
    expect(page.get_by_label("Problems of extra")).to_contain_text("unbound ports")
    page.get_by_role("button", name="Discard changes").click()
    expect(page.locator('[data-node-key="extra"]')).to_have_count(0)

    # An allowed edge is drawn, and saving makes a new version.
    page.get_by_label("From port").select_option("span.value")
    page.get_by_label("To port").select_option("stiffness.length")
    page.get_by_role("button", name="Connect", exact=True).click()
    expect(refusal).to_contain_text("Edge drawn: span.value (Length) → stiffness.length (Length)")
    page.get_by_role("button", name="Save new version").click()
    expect(refusal).to_contain_text("Saved as version 2.")

    page.get_by_role("link", name="Start a run").click()
    for name, value in RUN_INPUTS.items():
        page.get_by_label(re.compile(rf"^{name} ")).fill(value)
    # A wrong dimension is refused before anything is sent.
    page.get_by_label(re.compile(r"^load ")).fill("12 m")
    page.get_by_role("button", name="Start run").click()
    expect(page.get_by_label("Problems in the form")).to_contain_text("m is not a Force unit")
    assert "/runs/" not in page.url

    # How the run page follows a run (ticks on its events, over the WebSocket door) is
    # tests/web/test_events.py's: this short run may be over before any event is pushed.
    page.get_by_label(re.compile(r"^load ")).fill("12 kN")
    page.get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/ui/runs/[0-9a-f-]+$"))
    expect(page.get_by_role("heading", name=re.compile(r"^Run .* completed$"))).to_be_visible(
        timeout=90_000
    )
    outputs = page.get_by_role("table", name="Terminal outputs")
    expect(outputs).to_contain_text("verdict")
    expect(outputs).to_contain_text(re.compile(r"(PASS|FAIL) \((strength|stiffness) governs\)"))
    return page.url.rsplit("/", 1)[1]


def test_alice_edits_runs_and_reads_the_verdict_bob_cannot_see_it(
    platform: InProcessPlatform, new_page: Any
) -> None:
    base = platform.base_url
    run_id = _alice_runs_the_demo(new_page(), base)

    # The run page's figures are the server's: 12 kN reached the function in SI.
    with httpx.Client(
        base_url=base, headers={"Authorization": f"Bearer {platform.token('alice')}"}
    ) as http:
        run = http.get(f"/workflow-runs/{run_id}").json()
    assert run["status"] == "completed"
    assert run["inputs"]["load"] == {"value": 12, "unit": "kN"}

    bob = new_page()
    sign_in(bob, base, "bob", path=f"/ui/runs/{run_id}")
    expect(bob.get_by_role("alert")).to_contain_text(re.compile("PermissionDenied|NotFound"))
    bob.goto(base + "/ui/runs")
    expect(bob.get_by_role("heading", name="Runs")).to_be_visible()
    expect(bob.get_by_role("link", name=run_id[:8])).to_have_count(0)


def test_deep_links_serve_the_app_and_browsers_are_sent_to_it(platform: InProcessPlatform) -> None:
    with httpx.Client(base_url=platform.base_url) as http:
        root = http.get("/", headers={"Accept": "text/html"})
        assert root.status_code == 307
        assert root.headers["location"] == "/ui/"
        assert http.get("/", headers={"Accept": "application/json"}).status_code == 404
        assert http.get("/ui").headers["location"].endswith("/ui/")
        deep = http.get("/ui/runs/some-run-id")
        assert deep.status_code == 200
        assert '<div id="root">' in deep.text
        asset = re.search(r'/ui/assets/[^"]+\.js', deep.text)
        assert asset is not None
        cached = http.get(asset.group(0))
        assert cached.status_code == 200
        assert "immutable" in cached.headers["cache-control"]
        assert http.get("/ui/assets/nope.js").status_code == 404
        graphiql = http.get("/graphql", headers={"Accept": "text/html"})
        assert graphiql.status_code == 200
        assert "cdn" not in graphiql.text.lower()
        assert "/ui/assets/" in graphiql.text


def test_graphiql_is_served_whole_and_uses_the_signed_in_token(
    platform: InProcessPlatform, new_page: Any
) -> None:
    page = new_page()
    sign_in(page, platform.base_url, "alice")
    page.goto(platform.base_url + "/graphql")
    # Monaco loads its editors (and workers) from the server too: wait for the query to show.
    expect(page.locator(".graphiql-query-editor")).to_contain_text("username", timeout=30_000)
    page.get_by_role("button", name=re.compile("Execute query")).click()
    expect(page.locator(".graphiql-response")).to_contain_text(
        '"username": "alice"', timeout=30_000
    )


def test_graphiql_renders_under_style_src_self_with_no_csp_violation(
    platform: InProcessPlatform, new_page: Any
) -> None:
    """Contract 8b: GraphiQL's page allows no inline style (`style-src 'self'` and its nonce);
    its editor still lays its lines out (set through the CSS object model) and the browser
    reports no Content-Security-Policy violation."""
    page = new_page()
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.add_init_script(
        """window.__violations = [];
        document.addEventListener("securitypolicyviolation",
            (e) => window.__violations.push(e.effectiveDirective + " " + (e.sample || "")));"""
    )
    sign_in(page, platform.base_url, "alice")
    response = page.goto(platform.base_url + "/graphql")
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "unsafe-inline" not in policy
    expect(page.locator(".graphiql-query-editor")).to_contain_text("username", timeout=30_000)
    page.get_by_role("button", name=re.compile("Execute query")).click()
    expect(page.locator(".graphiql-response")).to_contain_text(
        '"username": "alice"', timeout=30_000
    )
    tops = page.evaluate(
        """() => [...document.querySelectorAll(".graphiql-query-editor .view-line")]
            .map((line) => line.getBoundingClientRect().top)"""
    )
    assert len(tops) >= 3
    assert len(set(tops)) == len(tops)  # each line in its own place, none stacked at the top
    assert page.evaluate("() => window.__violations") == []
    assert violations == []


def test_the_token_stays_out_of_local_storage(platform: InProcessPlatform, new_page: Any) -> None:
    """Contract 8b: a script injected into any page of the origin must not find a lasting token."""
    page = new_page()
    # A token left in localStorage by an older version of the app is dropped on the next load.
    page.goto(platform.base_url + "/ui/signin")
    page.evaluate("""() => localStorage.setItem("calcgraph.session", '{"accessToken":"old"}')""")
    sign_in(page, platform.base_url, "alice")
    stored = page.evaluate(
        """() => ({
        local: Object.keys(localStorage).map((k) => k + "=" + localStorage.getItem(k)).join("\\n"),
        session: sessionStorage.getItem("calcgraph.session"),
    })"""
    )
    assert stored["session"]
    assert "accessToken" in stored["session"]
    token = page.evaluate(
        """() => JSON.parse(sessionStorage.getItem("calcgraph.session")).accessToken"""
    )
    assert token not in stored["local"]
    assert "calcgraph.session" not in stored["local"]
    assert "accessToken" not in stored["local"]


def test_an_expired_session_signs_in_again_and_keeps_the_form(
    platform: InProcessPlatform, new_page: Any
) -> None:
    page = new_page()
    base = platform.base_url
    sign_in(page, base, "alice", path=f"/ui/workflows/{DEMO_SLUG}/run")
    page.get_by_label(re.compile(r"^load ")).fill("12 kN")
    page.get_by_label(re.compile(r"^span ")).fill("3 m")
    # The token runs out while the person types.
    page.evaluate(
        """() => {
        const session = JSON.parse(sessionStorage.getItem("calcgraph.session"));
        session.expiresAt = Date.now() - 1000;
        sessionStorage.setItem("calcgraph.session", JSON.stringify(session));
    }"""
    )
    page.get_by_label(re.compile(r"^youngs_modulus ")).fill("210 GPa")
    page.get_by_role("button", name="Start run").click()  # the form is incomplete: no request
    page.get_by_label(re.compile(r"^second_moment ")).fill("8.356e-5")
    page.get_by_label(re.compile(r"^section_modulus ")).fill("557 cm**3")
    page.get_by_label(re.compile(r"^yield_stress ")).fill("355 MPa")
    page.get_by_role("button", name="Start run").click()
    expect(page.get_by_role("status")).to_contain_text("Your session has ended")
    page.get_by_role("button", name="Sign in with your organisation").click()
    page.get_by_role("button", name="alice", exact=True).click()
    page.wait_for_url(re.compile(rf"/ui/workflows/{DEMO_SLUG}/run$"))
    expect(page.get_by_label(re.compile(r"^load "))).to_have_value("12 kN")
    expect(page.get_by_label(re.compile(r"^yield_stress "))).to_have_value("355 MPa")
