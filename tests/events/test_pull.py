"""GET /events (contract section 9, Pull): what is recorded for publishing and executing, the
CloudEvents envelope, filters, cursors, the long-poll, and who sees what."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from calcgraph.domain.events import repository as event_repository
from tests.events.helpers import events, of_subject, published
from tests.execution.conftest import Platform

pytestmark = pytest.mark.db


async def _execute(platform: Platform, package_id: str, x: float, user: str = "alice") -> str:
    response = await platform.execute(
        f"/packages/{package_id}/functions/run/execute",
        {"x": x},
        wait=20,
        headers=platform.headers(user),
    )
    assert response.status_code == 200, response.text
    job_id: str = response.json()["job_id"]
    return job_id


async def test_publish_and_jobs_are_recorded_as_cloudevents(platform: Platform) -> None:
    await platform.user("alice")
    start = (await events(platform, after="now"))["next_cursor"]
    report = await published(platform)
    package_id = report["package_id"]
    ok = await _execute(platform, package_id, 2.0)
    bad = await _execute(platform, package_id, -1.0)

    body = await events(platform, after=start)
    assert body["next_cursor"] is not None
    uploads = [e for e in body["items"] if e["subject"] == package_id]
    assert [e["type"] for e in uploads] == ["calcgraph.file.uploaded"]
    upload = uploads[0]
    assert upload["data"]["package"] == package_id
    assert upload["data"]["version"] == "1.0.0"
    assert upload["data"]["uploaded_by"] == "alice"
    assert [f["path"] for f in upload["data"]["files"]] == ["main.py"]
    assert len(upload["data"]["files"][0]["sha256"]) == 64
    assert of_subject(body, ok) == ["calcgraph.calculation.started", "calcgraph.job.succeeded"]
    assert of_subject(body, bad) == ["calcgraph.calculation.started", "calcgraph.job.failed"]
    failed = next(e for e in body["items"] if e["subject"] == bad and e["type"].endswith("failed"))
    assert failed["specversion"] == "1.0"
    assert failed["source"] == "calcgraph"
    assert failed["datacontenttype"] == "application/json"
    assert failed["time"].endswith("Z")
    assert failed["data"]["job_id"] == bad
    assert failed["data"]["status"] == "failed"
    assert failed["data"]["error"]["kind"] == "user_error"
    assert failed["data"]["run_id"] is None
    assert failed["data"]["node_key"] is None
    started = next(e for e in body["items"] if e["subject"] == ok)
    assert started["data"]["function_version_id"]
    assert started["data"]["function"]
    # Recorded order, one id each.
    ids = [e["id"] for e in body["items"]]
    assert len(ids) == len(set(ids))


async def test_type_prefix_subject_and_paging(platform: Platform) -> None:
    await platform.user("alice")
    start = (await events(platform, after="now"))["next_cursor"]
    report = await published(platform)
    job = await _execute(platform, report["package_id"], 1.0)
    jobs_only = await events(platform, after=start, type="calcgraph.job.*")
    assert {e["type"] for e in jobs_only["items"]} == {"calcgraph.job.succeeded"}
    exact = await events(
        platform, after=start, type=["calcgraph.calculation.started", "calcgraph.file.uploaded"]
    )
    assert {e["type"] for e in exact["items"]} == {
        "calcgraph.calculation.started",
        "calcgraph.file.uploaded",
    }
    by_subject = await events(platform, after=start, subject=job)
    assert [e["type"] for e in by_subject["items"]] == [
        "calcgraph.calculation.started",
        "calcgraph.job.succeeded",
    ]
    first = await events(platform, after=start, subject=job, limit=1)
    assert len(first["items"]) == 1
    rest = await events(platform, after=first["next_cursor"], subject=job)
    assert [e["type"] for e in rest["items"]] == ["calcgraph.job.succeeded"]
    end = await events(platform, after=rest["next_cursor"], subject=job)
    assert end["items"] == []
    assert end["next_cursor"] == rest["next_cursor"]


async def test_long_poll_answers_when_an_event_is_recorded(platform: Platform) -> None:
    await platform.user("alice")
    report = await published(platform)
    start = (await events(platform, after="now"))["next_cursor"]
    poll = asyncio.create_task(events(platform, after=start, wait=25, type="calcgraph.job.*"))
    await asyncio.sleep(0.2)
    assert not poll.done()
    job = await _execute(platform, report["package_id"], 3.0)
    body = await poll
    assert [e["subject"] for e in body["items"]] == [job]


async def test_wait_ends_empty_with_a_cursor(platform: Platform) -> None:
    await platform.user("alice")
    body = await events(platform, after="now", wait=0.3, type="calcgraph.build.*")
    assert body["items"] == []
    assert isinstance(body["next_cursor"], str)


@pytest.fixture(params=["probed", "hashed"])
def rule(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Who sees an event is decided per event near the log's end (`probed`) and by a hash of
    what the reader may see further from it (`hashed`): both ways, the same answers."""
    if request.param == "hashed":
        monkeypatch.setattr(event_repository, "PROBED_SPAN", -1)
    return str(request.param)


@pytest.mark.usefixtures("rule")
async def test_another_user_never_sees_them_and_admin_does(platform: Platform) -> None:
    await platform.user("alice")
    await platform.user("bob")
    start = (await events(platform, after="now"))["next_cursor"]
    report = await published(platform)
    job = await _execute(platform, report["package_id"], 1.0)
    bob = await events(platform, "bob", after=start)
    assert not [e for e in bob["items"] if e["subject"] in (job, report["package_id"])]
    assert (await events(platform, "bob", after=start, subject=job))["items"] == []
    admin = await platform.client.get(
        "/events",
        params={"after": start, "subject": job},
        headers=platform.headers("root", roles=["admin", "user"]),
    )
    assert [e["type"] for e in admin.json()["items"]] == [
        "calcgraph.calculation.started",
        "calcgraph.job.succeeded",
    ]


@pytest.mark.usefixtures("rule")
async def test_a_public_package_shows_its_upload_but_not_alices_jobs(platform: Platform) -> None:
    await platform.user("alice")
    await platform.user("bob")
    start = (await events(platform, after="now"))["next_cursor"]
    report = await published(platform, visibility="public")
    job = await _execute(platform, report["package_id"], 1.0)
    bob = await events(platform, "bob", after=start)
    assert of_subject(bob, report["package_id"]) == ["calcgraph.file.uploaded"]
    assert of_subject(bob, job) == []


@pytest.mark.parametrize(
    "params",
    [
        {"type": "calcgraph.nothing"},
        {"type": "bogus.*"},
        {"type": "calc*graph"},
        {"limit": "501"},
        {"limit": "0"},
        {"wait": "31"},
        {"wait": "-1"},
        {"after": "abc"},
        {"after": "-3"},
        {"subject": "a\x00b"},
        {"subject": "x" * 37},
    ],
)
async def test_bad_queries_are_422(platform: Platform, params: dict[str, str]) -> None:
    await platform.user("alice")
    response = await platform.client.get("/events", params=params, headers=platform.headers())
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("ValidationError: ")


async def test_no_token_is_401(platform: Platform) -> None:
    response = await platform.client.get("/events")
    assert response.status_code == 401


@pytest.mark.usefixtures("rule")
async def test_joining_and_leaving_an_organization(platform: Platform) -> None:
    await platform.user("alice")
    await platform.user("bob")
    slug = f"org-{uuid.uuid4().hex[:8]}"
    headers = platform.headers("alice")
    made = await platform.client.post(
        "/organizations", json={"slug": slug, "name": slug}, headers=headers
    )
    assert made.status_code == 201, made.text
    start = (await events(platform, after="now"))["next_cursor"]
    report = await published(platform, visibility="internal", organization=slug)
    package_id = report["package_id"]
    assert of_subject(await events(platform, "bob", after=start), package_id) == []
    joined = await platform.client.post(
        f"/organizations/{slug}/members",
        json={"username": "bob", "role": "member"},
        headers=headers,
    )
    assert joined.status_code == 201, joined.text
    seen = await events(platform, "bob", after=start)
    assert of_subject(seen, package_id) == ["calcgraph.file.uploaded"]
    left = await platform.client.delete(f"/organizations/{slug}/members/bob", headers=headers)
    assert left.status_code == 204
    assert of_subject(await events(platform, "bob", after=start), package_id) == []
