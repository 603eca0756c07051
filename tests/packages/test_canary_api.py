"""Contract 11, canary: unpinned calls shared by the split, the candidate judged (here by
calling the timer's round with a chosen clock, on job rows finished by hand; the workers'
own timer is in tests/execution/test_canary_workers.py), promote and roll back during a
canary, and the hostile manifests. Both databases."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from calcgraph.db.engine import Database
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.packages import canary_rules
from calcgraph.domain.packages.canary.service import canary_service
from calcgraph.domain.packages.models import CanaryJob
from tests.packages.publishing import Bearer, publish, small_body
from tests.workflows.graphs import fn, inp

pytestmark = pytest.mark.db

SEED = 2026


def body(name: str, version: str, canary: dict[str, Any] | None = None) -> dict[str, Any]:
    request = small_body(name, version, code=f"def run(x):\n    return {{'y': {version[0]}}}\n")
    if canary is not None:
        request["manifest"]["package"]["deployment"] = {"strategy": "canary", "canary": canary}
    return request


@pytest.fixture(autouse=True)
def seeded() -> Iterator[None]:
    canary_service.rng.seed(SEED)
    yield
    canary_service.rng.seed()


async def call(
    client: httpx.AsyncClient, headers: dict[str, str], path: str, x: float = 1
) -> dict[str, Any]:
    """An execute left queued (no workers here): its job."""
    response = await client.post(
        path, params={"wait": 0}, json={"inputs": {"x": x}}, headers=headers
    )
    assert response.status_code == 202, response.text
    job = await client.get(f"/jobs/{response.json()['job_id']}", headers=headers)
    answer: dict[str, Any] = job.json()
    return answer


async def canary_pkg(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    name: str,
    split: dict[str, float] | None = None,
    **canary: Any,
) -> tuple[str, str, str]:
    """1.0.0 (rolling), then 2.0.0 as a canary: the package id and both version ids."""
    first = await publish(client, headers, body(name, "1.0.0"))
    second = await publish(
        client,
        headers,
        body(name, "2.0.0", {"traffic_split": split or {"1.0.0": 90, "2.0.0": 10}, **canary}),
    )
    return (
        first["package_id"],
        first["functions"][0]["version_id"],
        second["functions"][0]["version_id"],
    )


async def finish(
    database: Database, version_id: str, status: str, ms: float, kind: str | None = None
) -> int:
    """Every queued job of that function version finished as told (what workers would do)."""
    async with database.write_session() as session:
        started = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
        result = await session.execute(
            update(Job)
            .where(Job.function_version_id == version_id, Job.status == "queued")
            .values(
                status=status,
                started_at=started,
                finished_at=started + timedelta(milliseconds=ms),
                error={"kind": kind, "message": kind} if kind else None,
            )
        )
        return int(getattr(result, "rowcount", 0))


async def judge(database: Database, at: datetime | None = None) -> list[Any]:
    async with database.write_session() as session:
        return await canary_service.judge(session, at)


async def state(client: httpx.AsyncClient, headers: dict[str, str], pid: str) -> dict[str, Any]:
    response = await client.get(f"/packages/{pid}/deployment", headers=headers)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


class TestRouting:
    async def test_unpinned_calls_follow_the_split_pinned_ones_do_not(
        self, client: httpx.AsyncClient, bearer: Bearer, database: Database
    ) -> None:
        alice = bearer("alice")
        pid, v1, v2 = await canary_pkg(client, alice, "cn-route", duration="10m")
        # The same draws the service makes, through the pure rule.
        draws = random.Random(SEED)
        split = [("1.0.0", 90.0), ("2.0.0", 10.0)]
        expected = Counter(canary_rules.route(split, draws.random()) for _ in range(60))
        got: Counter[str] = Counter()
        paths = ["/packages/cn-route/functions/run/execute"] * 40 + [
            "/packages/cn-route/functions/run@latest/execute"
        ] * 20
        for path in paths:
            job = await call(client, alice, path)
            got["2.0.0" if job["function_version_id"] == v2 else "1.0.0"] += 1
        assert got == expected
        assert got["2.0.0"] > 0
        assert got["1.0.0"] > got["2.0.0"]
        # Pinned calls are never routed, whichever way they pin.
        for path, wanted in (
            ("/packages/cn-route@2.0.0/functions/run/execute", v2),
            ("/packages/cn-route@1.0.0/functions/run/execute", v1),
            (f"/functions/{v1}/execute", v1),
        ):
            for _ in range(5):
                assert (await call(client, alice, path))["function_version_id"] == wanted
        answer = await state(client, alice, pid)
        assert answer["strategy"] == "canary"
        assert answer["state"] == "canary"
        assert (answer["current"], answer["candidate"]) == ("1.0.0", "2.0.0")
        assert answer["traffic_split"] == {"1.0.0": 90, "2.0.0": 10}
        started = datetime.fromisoformat(answer["started_at"])
        assert datetime.fromisoformat(answer["ends_at"]) - started == timedelta(minutes=10)
        assert answer["observed"] == {
            "jobs": 0,
            "failed": 0,
            "error_rate": None,
            "latency_p95_ms": None,
            "routed": dict(expected),
        }
        assert [h["action"] for h in answer["history"]][-2:] == ["deployed", "canary_started"]
        # The package's current version did not move.
        assert (await client.get(f"/packages/{pid}", headers=alice)).json()[
            "current_version"
        ] == "1.0.0"

    async def test_a_workflow_saved_during_a_canary_gets_the_current_version(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        # Every unpinned call would go to the candidate: a save still does not.
        _, v1, _ = await canary_pkg(client, alice, "cn-wf", {"1.0.0": 0, "2.0.0": 100})
        graph = {
            "nodes": [
                inp("x"),
                fn("f", "cn-wf/run", x="x"),
                fn("g", "cn-wf/run@latest", x="x"),
            ]
        }
        response = await client.post(
            "/workflows", json={"slug": "cn-wf", "name": "w", "graph": graph}, headers=alice
        )
        assert response.status_code == 201, response.text
        resolved = response.json()["resolved_functions"]
        # Unpinned and @latest alike: the current version.
        assert (resolved["f"], resolved["g"]) == (v1, v1)
        # A new version saved meanwhile too.
        again = await client.put("/workflows/cn-wf", json={"graph": graph}, headers=alice)
        assert again.status_code == 200, again.text
        assert again.json()["resolved_functions"]["g"] == v1

    async def test_a_function_id_is_an_unpinned_call(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        pid, _, v2 = await canary_pkg(client, alice, "cn-fid", {"1.0.0": 0, "2.0.0": 100})
        function_id = (await call(client, alice, "/packages/cn-fid/functions/run@1.0.0/execute"))[
            "function_id"
        ]
        job = await call(client, alice, f"/functions/{function_id}/execute")
        assert job["function_version_id"] == v2
        assert (await state(client, alice, pid))["observed"]["routed"] == {"2.0.0": 1}


class TestJudging:
    async def test_a_healthy_candidate_is_promoted_once_when_due(
        self, client: httpx.AsyncClient, bearer: Bearer, database: Database
    ) -> None:
        alice = bearer("alice")
        pid, v1, v2 = await canary_pkg(
            client,
            alice,
            "cn-ok",
            {"1.0.0": 50, "2.0.0": 50},
            duration=60,
            success_criteria={"error_rate_max": "5%", "latency_p95_max": 500},
        )
        for _ in range(30):
            await call(client, alice, "/packages/cn-ok/functions/run/execute")
        assert await finish(database, v2, "success", 120) > 0
        await finish(database, v1, "failed", 9000, "user_error")  # the current's: not judged
        answer = await state(client, alice, pid)
        assert answer["observed"]["error_rate"] == 0
        assert answer["observed"]["latency_p95_ms"] == 120
        ends = datetime.fromisoformat(answer["ends_at"])
        assert await judge(database, ends - timedelta(seconds=1)) == []  # not due yet
        decided = await judge(database, ends)
        assert [(d.package, d.candidate, d.action) for d in decided] == [
            ("cn-ok", "2.0.0", "promoted")
        ]
        assert await judge(database, ends + timedelta(hours=1)) == []  # exactly once
        answer = await state(client, alice, pid)
        assert (answer["state"], answer["current"], answer["candidate"]) == (
            "stable",
            "2.0.0",
            None,
        )
        assert answer["traffic_split"] is None
        assert answer["observed"] is None
        assert answer["history"][-1]["action"] == "promoted"
        assert "within the criteria" in answer["history"][-1]["reason"]
        assert (await call(client, alice, "/packages/cn-ok/functions/run/execute"))[
            "function_version_id"
        ] == v2
        events = await client.get(
            "/events", params={"type": "calcgraph.deployment.*", "subject": pid}, headers=alice
        )
        data = [(e["type"], e["data"]) for e in events.json()["items"]]
        assert len(data) == 1
        kind, payload = data[0]
        assert kind == "calcgraph.deployment.promoted"
        assert (payload["package"], payload["version"], payload["previous"]) == (
            "cn-ok",
            "2.0.0",
            "1.0.0",
        )
        assert payload["reason"].startswith("canary judged")

    async def test_a_slow_candidate_is_rolled_back_and_stays_reachable(
        self, client: httpx.AsyncClient, bearer: Bearer, database: Database
    ) -> None:
        alice = bearer("alice")
        pid, v1, v2 = await canary_pkg(
            client,
            alice,
            "cn-slow",
            {"1.0.0": 0, "2.0.0": 100},
            success_criteria={"latency_p95_max": 200},
        )
        for _ in range(5):
            await call(client, alice, "/packages/cn-slow/functions/run/execute")
        await finish(database, v2, "success", 900)
        ends = datetime.fromisoformat((await state(client, alice, pid))["ends_at"])
        assert ends - datetime.fromisoformat((await state(client, alice, pid))["started_at"]) == (
            timedelta(hours=1)  # the default duration
        )
        assert await judge(database, ends - timedelta(minutes=1)) == []  # no rate to end early
        [decided] = await judge(database, ends)
        assert decided.action == "rolled_back"
        assert "p95 above the maximum 200 ms" in decided.reason
        answer = await state(client, alice, pid)
        assert (answer["state"], answer["current"], answer["candidate"]) == (
            "stable",
            "1.0.0",
            None,
        )
        assert (answer["history"][-1]["version"], answer["history"][-1]["action"]) == (
            "1.0.0",
            "rolled_back",
        )
        unpinned = await call(client, alice, "/packages/cn-slow/functions/run/execute")
        assert unpinned["function_version_id"] == v1
        pinned = await call(client, alice, "/packages/cn-slow@2.0.0/functions/run/execute")
        assert pinned["function_version_id"] == v2
        events = await client.get(
            "/events", params={"type": "calcgraph.deployment.*", "subject": pid}, headers=alice
        )
        [event] = events.json()["items"]
        assert event["type"] == "calcgraph.deployment.rolled_back"
        assert (event["data"]["version"], event["data"]["previous"]) == ("1.0.0", "2.0.0")
        # A new deployment may follow.
        await publish(client, alice, body("cn-slow", "3.0.0"))

    async def test_early_roll_back_after_20_finished_jobs_cancelled_ones_aside(
        self, client: httpx.AsyncClient, bearer: Bearer, database: Database
    ) -> None:
        alice = bearer("alice")
        pid, _, v2 = await canary_pkg(
            client,
            alice,
            "cn-early",
            {"1.0.0": 0, "2.0.0": 100},
            success_criteria={"error_rate_max": 0.1},
        )
        for _ in range(5):
            await call(client, alice, "/packages/cn-early/functions/run/execute")
        await finish(database, v2, "failed", 10, "cancelled")
        for _ in range(19):
            await call(client, alice, "/packages/cn-early/functions/run/execute")
        await finish(database, v2, "failed", 10, "timeout")
        started = datetime.fromisoformat((await state(client, alice, pid))["started_at"])
        # 19 judged (5 cancelled left out): not yet.
        assert await judge(database, started) == []
        observed = (await state(client, alice, pid))["observed"]
        assert (observed["jobs"], observed["failed"], observed["error_rate"]) == (19, 19, 1.0)
        await call(client, alice, "/packages/cn-early/functions/run/execute")
        await finish(database, v2, "failed", 10, "timeout")
        [decided] = await judge(database, started)
        assert decided.action == "rolled_back"
        assert "after 20 finished jobs" in decided.reason
        assert "timeout: 20" in decided.reason
        assert (await state(client, alice, pid))["state"] == "stable"

    async def test_no_finished_job_is_no_evidence(
        self, client: httpx.AsyncClient, bearer: Bearer, database: Database
    ) -> None:
        alice = bearer("alice")
        pid, _, _ = await canary_pkg(client, alice, "cn-none", duration="30s")
        ends = datetime.fromisoformat((await state(client, alice, pid))["ends_at"])
        [decided] = await judge(database, ends)
        assert decided.action == "rolled_back"
        assert "no finished job" in decided.reason


class TestByHand:
    async def test_promote_and_roll_back_during_a_canary(
        self, client: httpx.AsyncClient, bearer: Bearer, database: Database
    ) -> None:
        alice, bob = bearer("alice"), bearer("bob")
        await client.get("/auth/me", headers=bob)
        pid, v1, v2 = await canary_pkg(client, alice, "cn-hand")
        await client.patch(f"/packages/{pid}", json={"visibility": "public"}, headers=alice)
        # Bob sees the canary, may not decide it.
        assert (await state(client, bob, pid))["state"] == "canary"
        for path in (f"/packages/{pid}/versions/2.0.0/promote", f"/packages/{pid}/rollback"):
            denied = await client.post(path, headers=bob)
            assert denied.status_code == 403, denied.text
            assert denied.json()["detail"].startswith("PermissionDenied: ")
        assert (await state(client, bob, pid))["state"] == "canary"
        # Another deployment while it runs: 409, nothing written.
        again = await client.post("/packages", json=body("cn-hand", "3.0.0"), headers=alice)
        assert again.status_code == 409, again.text
        assert "canary of 2.0.0" in again.json()["detail"]
        # The owner rolls it back: the current version stays, the candidate is still hosted.
        rolled = await client.post(f"/packages/{pid}/rollback", headers=alice)
        assert rolled.status_code == 200, rolled.text
        assert (rolled.json()["state"], rolled.json()["current"]) == ("stable", "1.0.0")
        assert "rolled back by alice" in rolled.json()["history"][-1]["reason"]
        assert (await call(client, alice, "/packages/cn-hand/functions/run/execute"))[
            "function_version_id"
        ] == v1
        assert await judge(database, datetime(2100, 1, 1, tzinfo=UTC)) == []
        # A second canary, promoted by the owner before its end.
        await publish(
            client, alice, body("cn-hand", "3.0.0", {"traffic_split": {"1.0.0": 50, "3.0.0": 50}})
        )
        promoted = await client.post(f"/packages/{pid}/versions/3.0.0/promote", headers=alice)
        assert promoted.status_code == 200, promoted.text
        assert (promoted.json()["state"], promoted.json()["current"]) == ("stable", "3.0.0")
        assert await judge(database, datetime(2100, 1, 1, tzinfo=UTC)) == []
        assert v2  # the first candidate stays reachable by @version
        pinned = await call(client, alice, "/packages/cn-hand@2.0.0/functions/run/execute")
        assert pinned["function_version_id"] == v2


class TestHostileManifests:
    async def test_unhosted_versions_and_bad_weights_are_422(
        self, client: httpx.AsyncClient, bearer: Bearer
    ) -> None:
        alice = bearer("alice")
        await publish(client, alice, body("cn-bad", "1.0.0"))
        cases: list[tuple[dict[str, Any], str]] = [
            ({"traffic_split": {"1.0.0": 90, "9.9.9": 10}}, "9.9.9"),
            ({"traffic_split": {"1.0.0": 90, "2.0.0": 20}}, "add up to 100"),
            ({"traffic_split": {"1.0.0": 50, "0.5.0": 50}}, "must name the version deployed"),
            ({"traffic_split": {"1.0.0": "ten", "2.0.0": 90}}, "traffic_split"),
            ({"traffic_split": {"1.0.0": -10, "2.0.0": 110}}, "traffic_split"),
            ({"traffic_split": {"not-a-version": 10, "2.0.0": 90}}, "traffic_split"),
            ({"traffic_split": {"1.0.0": 90, "2.0.0": 10}, "duration": "-5m"}, "duration"),
            ({"traffic_split": {"1.0.0": 90, "2.0.0": 10}, "duration": "forever"}, "duration"),
        ]
        for canary, word in cases:
            response = await client.post(
                "/packages", json=body("cn-bad", "2.0.0", canary), headers=alice
            )
            assert response.status_code == 422, (canary, response.text)
            assert response.json()["detail"].startswith("ValidationError: ")
            assert word in response.text, (canary, response.text)
        versions = await client.get("/packages/cn-bad/versions", headers=alice)
        assert [v["version"] for v in versions.json()["versions"]] == ["1.0.0"]

    async def test_a_split_of_100_versions(
        self, client: httpx.AsyncClient, bearer: Bearer, database: Database
    ) -> None:
        alice = bearer("alice")
        hosted = [f"1.{i}.0" for i in range(99)]
        split = {v: 1 for v in [*hosted, "2.0.0"]}
        # None of the 99 is hosted: 422, naming a bounded few.
        await publish(client, alice, body("cn-100", "0.1.0"))
        response = await client.post(
            "/packages", json=body("cn-100", "2.0.0", {"traffic_split": split}), headers=alice
        )
        assert response.status_code == 422, response.text
        assert "and 89 more" in response.json()["detail"]
        assert len(response.text) < 4000
        # All 99 hosted: accepted, and every unpinned call goes to a version of the split.
        for version in hosted:
            await publish(client, alice, body("cn-100", version))
        report = await publish(client, alice, body("cn-100", "2.0.0", {"traffic_split": split}))
        pid = report["package_id"]
        answer = await state(client, alice, pid)
        assert (answer["state"], len(answer["traffic_split"])) == ("canary", 100)
        for _ in range(30):
            await call(client, alice, "/packages/cn-100/functions/run/execute")
        routed = (await state(client, alice, pid))["observed"]["routed"]
        assert sum(routed.values()) == 30
        assert set(routed) <= set(split)
        assert len(routed) > 10
        async with database.read_session() as session:
            rows = list(await session.scalars(select(CanaryJob.version)))
        assert Counter(rows) >= Counter(routed)
