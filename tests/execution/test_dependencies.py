"""Contract 11, Dependencies, on every sandbox backend and both databases: handlers import a
dependency's modules under its name (`-` written `_`), transitively; the pins hold after newer
releases of the dependencies until the package is deployed again, and neither the warm pool nor
the result cache serves the old code after a new pin. A dependency that went private later
keeps running in the versions that pinned it (checked at deployment); a new deployment is
refused without revealing it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.execution.conftest import Platform

pytestmark = pytest.mark.db

IO = {"inputs": {"x": {"type": "Float"}}, "outputs": {"y": {"type": "Float"}}}


def body(
    name: str,
    version: str,
    files: dict[str, str],
    deps: dict[str, str] | None = None,
    handler: str | None = None,
) -> dict[str, Any]:
    package: dict[str, Any] = {"name": name, "version": version}
    if deps:
        package["dependencies"] = deps
    functions = {"run": {"handler": handler, **IO}} if handler else {}
    if not functions:
        # A library still declares one function: a package carries at least one.
        functions = {"noop": {"handler": "noop:run", **IO}}
        files = {**files, "noop.py": "def run(x):\n    return {'y': x}\n"}
    return {
        "manifest": {"kind": "package", "version": 1, "package": package, "functions": functions},
        "files": files,
    }


async def deploy(platform: Platform, request: dict[str, Any], user: str = "alice") -> Any:
    response = await platform.client.post("/packages", json=request, headers=platform.headers(user))
    assert response.status_code == 201, response.text
    return response.json()


async def y(platform: Platform, path: str, x: float) -> float:
    response = await platform.execute(path, {"x": x})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["status"] == "success", answer
    return float(answer["outputs"]["y"])


class TestDependenciesInTheSandbox:
    async def test_transitive_import_pinning_and_fresh_code_after_a_new_pin(
        self, any_sandbox_platform: Platform
    ) -> None:
        platform = any_sandbox_platform
        tag = uuid.uuid4().hex[:8]
        base, mid, app = f"dep-base-{tag}", f"dep-mid-{tag}", f"dep-app-{tag}"
        base_mod, mid_mod = base.replace("-", "_"), mid.replace("-", "_")
        # bob's base library (public), alice's middle library on it, alice's app on that.
        await deploy(platform, body(base, "1.0.0", {"core.py": "OFFSET = 1.0\n"}), user="bob")
        await platform.client.patch(
            f"/packages/{base}", json={"visibility": "public"}, headers=platform.headers("bob")
        )
        mid_code = (
            f"from {base_mod} import core\n\ndef scale(x):\n    return 10 * x + core.OFFSET\n"
        )
        await deploy(platform, body(mid, "1.0.0", {"calc.py": mid_code}, {base: "^1"}))
        app_code = (
            f"import {mid_mod}.calc\n\ndef run(x):\n    return {{'y': {mid_mod}.calc.scale(x)}}\n"
        )
        report = await deploy(
            platform, body(app, "1.0.0", {"main.py": app_code}, {mid: "^1"}, "main:run")
        )
        assert report["dependency_closure"] == {mid: "1.0.0", base: "1.0.0"}
        unpinned = f"/packages/{app}/functions/run/execute"
        assert await y(platform, unpinned, 2) == 21.0  # transitively imported
        assert await y(platform, unpinned, 3) == 31.0  # a warm sandbox, the same code

        # Newer releases of both libraries change nothing until the app is deployed again.
        await deploy(platform, body(base, "1.1.0", {"core.py": "OFFSET = 5.0\n"}), user="bob")
        await deploy(platform, body(mid, "1.1.0", {"calc.py": mid_code}, {base: "^1"}))
        assert await y(platform, unpinned, 4) == 41.0

        # Deployed again (the same code): new pins, a new function version, and the same
        # inputs as before are computed afresh, not answered from the cache or an old sandbox.
        again = await deploy(
            platform, body(app, "1.0.1", {"main.py": app_code}, {mid: "^1"}, "main:run")
        )
        assert again["dependency_closure"] == {mid: "1.1.0", base: "1.1.0"}
        assert await y(platform, unpinned, 2) == 25.0
        assert await y(platform, unpinned, 3) == 35.0
        # The earlier version still runs with what it pinned.
        assert await y(platform, f"/packages/{app}@1.0.0/functions/run/execute", 2) == 21.0

        # The base library goes private: the versions that pinned it keep running, since the
        # pins were checked when the app was deployed ...
        hidden = await platform.client.patch(
            f"/packages/{base}", json={"visibility": "private"}, headers=platform.headers("bob")
        )
        assert hidden.status_code == 200, hidden.text
        assert await y(platform, unpinned, 6) == 65.0
        # ... a dependency brought along as pinned needs no new check either ...
        await deploy(platform, body(app, "1.0.2", {"main.py": app_code}, {mid: "^1"}, "main:run"))
        # ... but depending on it directly now is refused exactly like a missing package.
        direct = body(f"dep-direct-{tag}", "1.0.0", {"main.py": app_code}, {base: "^1"}, "main:run")
        refused = await platform.client.post(
            "/packages", json=direct, headers=platform.headers("alice")
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["errors"][0]["msg"] == (
            f"dependency {base!r}: no package {base!r} that you can see is hosted here"
        )
