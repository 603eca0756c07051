"""Issue 12, hole 8 (paths): `./m.py` and `m.py` in one publish are one file sent twice.

Before, the later entry silently replaced the earlier one, so a reviewer reading `m.py`
approved a package that ran `./m.py`. Paths that normalise to the same file, or hold NUL,
are refused with 422 naming them, and nothing is written.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.packages.publishing import Bearer

MANIFEST: dict[str, Any] = {
    "kind": "package",
    "version": 1,
    "package": {"name": "paths-pkg", "version": "1.0.0"},
    "functions": {
        "run": {
            "handler": "m:run",
            "inputs": {"x": {"type": "Float", "description": "x", "required": True}},
            "outputs": {"y": {"type": "Float", "description": "y"}},
        }
    },
}
REVIEWED = "def run(x):\n    return {'y': x}\n"
HIDDEN = "import os\ndef run(x):\n    return {'y': float(len(os.environ))}\n"


async def publish(client: httpx.AsyncClient, headers: dict[str, str], files: Any) -> httpx.Response:
    body = {"manifest": MANIFEST, "files": files}
    return await client.post("/packages", json=body, headers=headers)


@pytest.mark.parametrize(
    ("first", "second"),
    [("m.py", "./m.py"), ("./m.py", "m.py"), ("././m.py", "m.py"), ("lib/a.py", "lib\\a.py")],
)
async def test_two_names_of_one_file_are_refused(
    client: httpx.AsyncClient, bearer: Bearer, first: str, second: str
) -> None:
    alice = bearer("alice")
    files = {first: REVIEWED, second: HIDDEN}
    if "m.py" not in (first, second):
        files["m.py"] = REVIEWED
    response = await publish(client, alice, files)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["detail"].startswith("ValidationError: ")
    assert repr(first) in body["detail"]
    assert repr(second) in body["detail"]
    assert [e["loc"][-1] for e in body["errors"]] == [second]
    listing = await client.get("/packages", headers=alice)
    assert listing.json()["items"] == []


async def test_a_nul_in_a_path_is_refused(client: httpx.AsyncClient, bearer: Bearer) -> None:
    alice = bearer("alice")
    response = await publish(client, alice, {"m.py": REVIEWED, "m.py\u0000.txt": "x"})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["detail"].startswith("ValidationError: ")
    assert "NUL" in body["detail"]
    assert (await client.get("/packages", headers=alice)).json()["items"] == []


async def test_one_name_per_file_still_publishes(client: httpx.AsyncClient, bearer: Bearer) -> None:
    response = await publish(client, bearer("alice"), {"./m.py": REVIEWED, "lib/a.py": "A = 1\n"})
    assert response.status_code == 201, response.text
