"""Hole 6 (job-output side) and issue 15: text and numbers a database cannot store.

A lone surrogate in a public function's output made the caller's `GET /jobs` answer 500; on
PostgreSQL a NUL in an output left the job `running`; NaN failed with Python's own "Out of range
float values are not JSON compliant". Now such an output fails the job with kind `user_error`
naming the output, and captured logs carry U+FFFD instead (contract section 8).
"""

from __future__ import annotations

import pytest

from calcgraph.workers.sandbox import SandboxBackend
from tests.execution.conftest import Platform
from tests.execution.factories import deploy
from tests.sandbox.conftest import Runner

RETURNS = """
import math
def main(kind):
    values = {
        "nul": "a\\x00b",
        "surrogate": "a\\ud800b",
        "nested_nul": {"inner": ["ok", "x\\x00"]},
        "key_surrogate": {"k\\udc00": 1},
        "nan": math.nan,
        "inf": math.inf,
        "minus_inf": -math.inf,
    }
    return {"value": values[kind]}
"""


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("nul", "'value' holds a NUL character"),
        ("surrogate", "'value' holds a lone surrogate"),
        ("nested_nul", "'value/inner[1]' holds a NUL character"),
        ("key_surrogate", "a key of the output 'value'"),
        ("nan", "'value' is NaN"),
        ("inf", "'value' is infinite"),
        ("minus_inf", "'value' is infinite"),
    ],
)
def test_unstorable_output_is_a_user_error(
    sandbox_backend: SandboxBackend, run: Runner, kind: str, says: str
) -> None:
    result = run(RETURNS, {"kind": kind}, ("value",))
    assert result.status == "failed", result
    assert result.error is not None
    assert result.error.kind == "user_error"
    assert says in result.error.message, result.error.message


def test_logs_replace_nul_and_surrogates(sandbox_backend: SandboxBackend, run: Runner) -> None:
    source = """
    import os, sys
    def main():
        os.write(1, b"nul:\\x00:end\\n")
        os.write(2, b"surrogate:\\xed\\xa0\\x80:end\\n")
        raise ValueError("bad \\x00 and \\ud800 in the message")
    """
    result = run(source)
    assert result.status == "failed"
    assert "\x00" not in result.logs
    assert "nul:\ufffd:end" in result.logs, result.logs
    assert "surrogate:" in result.logs
    assert ":end" in result.logs
    assert result.error is not None
    assert "\x00" not in result.error.message
    assert "\ud800" not in result.error.message
    assert all(not 0xD800 <= ord(c) <= 0xDFFF for c in result.logs + result.error.message)


UNSTORABLE_FUNCTION = {
    "main.py": RETURNS.replace("def main(kind):", "def unstorable(kind):")
    + "\ndef noisy():\n    import os\n    os.write(1, b'x\\x00y\\n')\n    return {'value': 'ok'}\n"
}


@pytest.mark.db
@pytest.mark.parametrize("kind", ["nul", "surrogate", "nan"])
async def test_job_fails_and_listing_answers(any_sandbox_platform: Platform, kind: str) -> None:
    """On both databases: the job ends `failed` (never stuck `running`), `GET /jobs/{id}` and
    `GET /jobs` answer 200 for the caller."""
    platform = any_sandbox_platform
    alice = await platform.user("alice")
    await platform.user("bob")
    deployed = await deploy(
        platform.database,
        alice,
        files=UNSTORABLE_FUNCTION,
        functions={
            "unstorable": {
                "handler": "main:unstorable",
                "inputs": {"kind": {"type": "String", "required": True}},
                "outputs": {"value": {"type": "String"}},
            },
            "noisy": {
                "handler": "main:noisy",
                "inputs": {},
                "outputs": {"value": {"type": "String"}},
            },
        },
        visibility="public",
    )
    base = f"/packages/{deployed.package_name}/functions"
    bob = platform.headers("bob")
    response = await platform.execute(
        f"{base}/unstorable/execute", {"kind": kind}, wait=20, headers=bob
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "failed", body
    assert body["error"]["kind"] == "user_error"
    assert "'value'" in body["error"]["message"]
    job = await platform.client.get(f"/jobs/{body['job_id']}", headers=bob)
    assert job.status_code == 200, job.text
    assert job.json()["status"] == "failed"
    listing = await platform.client.get("/jobs", headers=bob)
    assert listing.status_code == 200, listing.text
    assert body["job_id"] in {item["id"] for item in listing.json()["items"]}

    noisy = await platform.execute(f"{base}/noisy/execute", {}, wait=20, headers=bob)
    assert noisy.status_code == 200, noisy.text
    assert noisy.json()["status"] == "success", noisy.json()
    logs = (await platform.client.get(f"/jobs/{noisy.json()['job_id']}", headers=bob)).json()
    assert "x\ufffdy" in logs["logs"], logs
