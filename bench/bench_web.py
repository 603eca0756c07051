"""The run page of a 1,000-node run in a real browser (Debian's chromium, headless).

`first_render`: from navigation to the page having painted the whole plan (the app's JavaScript
loaded, the run's plan and its 999 node states fetched in two GraphQL requests sent together,
dagre's layout (in the page's worker, from the plan's arrival: `layout_ms_p50`), React Flow
drawn, its effects run, the frame painted). `live_update`: from a new
run state arriving (the answer of a tick the page sent on an event of the run, or of the 2 s tick
of the fallback) to the page having painted it. The app records both in
`window.__calcgraphRunMetrics`, at a task queued from the animation frame after the commit (it runs
once that frame is painted; until 2026-11-28 they were taken at the commit, before React Flow's
effects and the browser's paint); each repetition opens a fresh run in a fresh page.

Answer bytes beside each figure (as decoded): of the GraphQL reads of the first render together,
and of one tick's answer.

CPU beside each figure: the page's renderer main thread (Chrome's `Performance.getMetrics`
`TaskDuration`, through the DevTools protocol) from navigation to the figure's end, and this
process's (the in-process server and workers; `resource.getrusage`), in ms per page.

The graph: one Float input feeding 9 chains of 111 `step` nodes (1 + 999 nodes), ticked one
node per job (`CALCGRAPH_CHAIN_EXECUTION=node`) so the first tick submits 9 jobs, not 999.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.core import Options, Result, percentile

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CHAINS, LENGTH = 9, 111
REPETITIONS = 5
MANIFEST = {
    "kind": "package",
    "version": 1,
    "package": {"name": "bench-web", "version": "1.0.0"},
    "functions": {
        "step": {
            "handler": "step:step",
            "inputs": {"x": {"type": "Float", "required": True}},
            "outputs": {"y": {"type": "Float"}},
        }
    },
}
SOURCE = "def step(x):\n    return {'y': x + 1}\n"


def graph() -> dict[str, Any]:
    nodes: list[dict[str, Any]] = [
        {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}}
    ]
    for c in range(CHAINS):
        for i in range(LENGTH):
            binding = (
                {"source": "input_node", "input_key": "x", "from_port": "value"}
                if i == 0
                else {"source": "edge", "from_node_key": f"c{c}_{i - 1}", "from_port": "y"}
            )
            nodes.append(
                {
                    "node_key": f"c{c}_{i}",
                    "kind": "function",
                    "function": "bench-web/step",
                    "input_bindings": {"x": binding},
                }
            )
    return {"nodes": nodes}


def _gql(http: httpx.Client, query: str, variables: dict[str, Any]) -> Any:
    body = http.post("/graphql", json={"query": query, "variables": variables}).json()
    if body.get("errors"):
        raise RuntimeError(body["errors"][0]["message"])
    return body["data"]


def run_page(options: Options) -> list[Result]:
    from playwright.sync_api import sync_playwright

    from calcgraph import webui
    from calcgraph.demo.platform import InProcessPlatform
    from calcgraph.settings import Settings

    if not Path(CHROMIUM).exists() or not (webui.DIST / "index.html").is_file():
        print("web: skipped (needs /usr/bin/chromium and the built web app: make install)")
        return []
    first: list[float] = []
    update: list[float] = []
    first_cpu: list[tuple[float, float]] = []
    update_cpu: list[tuple[float, float]] = []
    first_bytes: list[int] = []
    update_bytes: list[int] = []
    layout_ms: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            database_url=f"sqlite+aiosqlite:///{tmp}/web.db",
            sandbox="process",
            chain_execution="node",
            oidc_issuer=None,
            redis_url=None,
        )
        with InProcessPlatform(settings) as platform:
            token = platform.token("alice")
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=platform.base_url, headers=headers, timeout=120) as http:
                _gql(
                    http,
                    "mutation($m: JSON!, $f: JSON!) { publishPackage(manifest: $m, files: $f)"
                    " { packageVersion } }",
                    {"m": MANIFEST, "f": {"step.py": SOURCE}},
                )
                _gql(
                    http,
                    'mutation($g: JSON!) { createWorkflow(slug: "wide", name: "1000 nodes",'
                    " graph: $g) { id } }",
                    {"g": graph()},
                )
                with sync_playwright() as p:
                    browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                    session = json.dumps(
                        {
                            "accessToken": token,
                            "expiresAt": (time.time() + 3600) * 1000,
                            "username": "alice",
                            "roles": ["user"],
                        }
                    )
                    for _ in range(REPETITIONS):
                        run = _gql(
                            http,
                            'mutation { createWorkflowRun(workflow: "wide", inputs: {x: 1})'
                            " { id } }",
                            {},
                        )["createWorkflowRun"]["id"]
                        context = browser.new_context(viewport={"width": 1440, "height": 900})
                        context.add_init_script(
                            f"sessionStorage.setItem('calcgraph.session', {json.dumps(session)})"
                        )
                        page = context.new_page()
                        answers: list[Any] = []
                        page.on("response", _graphql_answers(answers))
                        cpu = Cpu(context, page)
                        page.goto(f"{platform.base_url}/ui/runs/{run}")
                        page.wait_for_function(
                            "() => window.__calcgraphRunMetrics?.firstRenderMs != null",
                            timeout=60_000,
                        )
                        first_cpu.append(cpu.lap())
                        first_bytes.append(_bytes(answers, ticks=False))
                        laid = page.evaluate(
                            "() => performance.getEntriesByName('calcgraph:layout', 'measure')"
                            ".map(m => [m.duration, m.detail.where])"
                        )
                        if [where for _, where in laid] != ["worker"]:
                            raise RuntimeError(f"not laid out once in the worker: {laid}")
                        layout_ms.append(float(laid[0][0]))
                        page.wait_for_function(
                            "() => window.__calcgraphRunMetrics.updates.length > 0",
                            timeout=60_000,
                        )
                        update_cpu.append(cpu.lap())
                        update_bytes.append(_bytes(answers, ticks=True))
                        metrics = page.evaluate("() => window.__calcgraphRunMetrics")
                        drawn = page.locator("[data-node-key]").count()
                        first.append(float(metrics["firstRenderMs"]))
                        update.append(float(metrics["updates"][0]))
                        context.close()
                    browser.close()
    load = os.getloadavg()
    setup = (
        f"chromium headless 1440x900, run of {1 + CHAINS * LENGTH} nodes "
        f"({drawn} drawn in view), {REPETITIONS} fresh pages"
    )
    return [
        _result(
            "web_run_page_first_render",
            setup,
            first,
            load,
            first_cpu,
            first_bytes,
            more={"layout_ms_p50": round(percentile(sorted(layout_ms), 50), 1)},
        ),
        _result("web_run_page_live_update", setup, update, load, update_cpu, update_bytes),
    ]


def _graphql_answers(into: list[Any]) -> Any:
    """A page's `response` listener keeping its GraphQL answers (read once the figure is taken:
    reading a body inside the listener would wait on the page in the middle of its work)."""

    def keep(response: Any) -> None:
        if response.url.endswith("/graphql") and response.request.method == "POST":
            into.append(response)

    return keep


def _bytes(answers: list[Any], ticks: bool) -> int:
    """Bytes (as decoded) of the GraphQL answers kept since the previous call: of a tick
    (`tickRun`), on average, or of all the other requests together (the first render's reads; a
    tick may arrive before the figure is taken). Those counted leave the list."""
    counted = [a for a in answers if ("tickRun" in (a.request.post_data or "")) == ticks]
    for a in counted:
        answers.remove(a)
    total = sum(len(a.body()) for a in counted)
    return total // len(counted) if ticks and counted else total


class Cpu:
    """CPU spent for one page since the previous lap: its renderer's main thread (DevTools
    `Performance.getMetrics` TaskDuration) and this process's (server and in-process workers)."""

    def __init__(self, context: Any, page: Any) -> None:
        self.session = context.new_cdp_session(page)
        self.session.send("Performance.enable")
        self.renderer, self.server = self._now()

    def _now(self) -> tuple[float, float]:
        metrics = self.session.send("Performance.getMetrics")["metrics"]
        task = next(m["value"] for m in metrics if m["name"] == "TaskDuration")
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return task * 1000, (usage.ru_utime + usage.ru_stime) * 1000

    def lap(self) -> tuple[float, float]:
        renderer, server = self._now()
        spent = (renderer - self.renderer, server - self.server)
        self.renderer, self.server = renderer, server
        return spent


def _result(
    name: str,
    setup: str,
    values_ms: list[float],
    load: tuple[float, ...],
    cpu: list[tuple[float, float]],
    answer_bytes: list[int] | None = None,
    scenario: str = "1000-node run page",
    more: dict[str, Any] | None = None,
) -> Result:
    ordered = sorted(values_ms)
    seconds = sum(values_ms) / 1000
    renderer = sorted(c[0] for c in cpu)
    server = sorted(c[1] for c in cpu)
    return Result(
        benchmark=name,
        scenario=scenario,
        setup=setup,
        requests=len(ordered),
        seconds=round(seconds, 3),
        rps=len(ordered) / seconds if seconds > 0 else float("nan"),
        p50_us=percentile(ordered, 50) * 1000,
        p99_us=percentile(ordered, 99) * 1000,
        extra={
            "ms": [round(v, 1) for v in values_ms],
            "renderer_cpu_ms_p50": round(percentile(renderer, 50), 1),
            "server_cpu_ms_p50": round(percentile(server, 50), 1),
            **({"answer_bytes_p50": percentile(sorted(answer_bytes), 50)} if answer_bytes else {}),
            **(more or {}),
            "loadavg": load,
        },
    )


EDITOR_NODES = 200


def editor_graph() -> dict[str, Any]:
    """One input and 199 `step` nodes in 9 chains: a 200-node workflow to open in the editor."""
    nodes: list[dict[str, Any]] = [
        {"node_key": "x", "kind": "input", "input_spec": {"type_expr": "Float"}}
    ]
    for i in range(EDITOR_NODES - 1):
        chain, step = i % CHAINS, i // CHAINS
        binding = (
            {"source": "input_node", "input_key": "x", "from_port": "value"}
            if step == 0
            else {"source": "edge", "from_node_key": f"c{chain}_{step - 1}", "from_port": "y"}
        )
        nodes.append(
            {
                "node_key": f"c{chain}_{step}",
                "kind": "function",
                "function": "bench-web/step",
                "input_bindings": {"x": binding},
            }
        )
    return {"nodes": nodes}


def editor_page(options: Options) -> list[Result]:
    """From navigation to the editor having drawn a 200-node workflow with every node's ports
    (the workflow and its function's schema fetched, dagre's layout, React Flow drawn)."""
    from playwright.sync_api import sync_playwright

    from calcgraph import webui
    from calcgraph.demo.platform import InProcessPlatform
    from calcgraph.settings import Settings

    if not Path(CHROMIUM).exists() or not (webui.DIST / "index.html").is_file():
        print("web: skipped (needs /usr/bin/chromium and the built web app: make install)")
        return []
    opened: list[float] = []
    opened_cpu: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            database_url=f"sqlite+aiosqlite:///{tmp}/web.db",
            sandbox="process",
            oidc_issuer=None,
            redis_url=None,
        )
        with InProcessPlatform(settings) as platform:
            token = platform.token("alice")
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=platform.base_url, headers=headers, timeout=120) as http:
                _gql(
                    http,
                    "mutation($m: JSON!, $f: JSON!) { publishPackage(manifest: $m, files: $f)"
                    " { packageVersion } }",
                    {"m": MANIFEST, "f": {"step.py": SOURCE}},
                )
                _gql(
                    http,
                    'mutation($g: JSON!) { createWorkflow(slug: "editor200", name: "200 nodes",'
                    " graph: $g) { id } }",
                    {"g": editor_graph()},
                )
            session = json.dumps(
                {
                    "accessToken": token,
                    "expiresAt": (time.time() + 3600) * 1000,
                    "username": "alice",
                    "roles": ["user"],
                }
            )
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for _ in range(REPETITIONS):
                    context = browser.new_context(viewport={"width": 1440, "height": 900})
                    context.add_init_script(
                        f"sessionStorage.setItem('calcgraph.session', {json.dumps(session)})"
                    )
                    page = context.new_page()
                    cpu = Cpu(context, page)
                    page.goto(f"{platform.base_url}/ui/workflows/editor200")
                    page.wait_for_function(
                        "() => window.__calcgraphEditorMetrics?.openMs != null", timeout=60_000
                    )
                    opened_cpu.append(cpu.lap())
                    opened.append(
                        float(page.evaluate("() => window.__calcgraphEditorMetrics.openMs"))
                    )
                    context.close()
                browser.close()
    load = os.getloadavg()
    setup = (
        f"chromium headless 1440x900, workflow of {EDITOR_NODES} nodes, {REPETITIONS} fresh pages"
    )
    return [_result("web_editor_open", setup, opened, load, opened_cpu, scenario="200-node editor")]


BENCHMARKS = {"web_run_page": run_page, "web_editor": editor_page}
