"""Registry retention (spec: Limits) with a clock the tests control: pure rules with plain data,
then the adapter over real builds, records and artifact directories, and the command."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from calcgraph.builds.artifact import artifact_path
from calcgraph.builds.retention import cleanup
from calcgraph.db.engine import Database
from calcgraph.domain.builds.models import Build
from calcgraph.domain.builds.retention_rules import (
    BaseImage,
    StoredBuild,
    base_deletions,
    function_deletions,
    references_to_remove,
)
from calcgraph.settings import Settings
from tests.auth.idp import LocalIdentityProvider
from tests.builds.build_fixtures import build_settings
from tests.execution.conftest import quick_sandbox

Bearer = Callable[..., dict[str, str]]
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def stored(
    n: int, function: str = "f", *, age_days: int = 1, pulled_days: int | None = None,
    current: bool = False, reference: str | None = None,
) -> StoredBuild:  # fmt: skip
    finished = NOW - timedelta(days=age_days, minutes=n)
    return StoredBuild(
        build_id=f"{function}-{n}",
        function_id=function,
        reference=reference or f"docker:calcgraph/fn/{function}:{n}",
        finished_at=finished,
        last_pulled_at=NOW - timedelta(days=pulled_days) if pulled_days is not None else None,
        current=current,
    )


class TestRules:
    def test_ninety_days_after_the_last_pull(self) -> None:
        builds = [
            stored(1, age_days=200, pulled_days=89),
            stored(2, age_days=200, pulled_days=91),
            stored(3, age_days=91),  # never pulled: counted from the build
            stored(4, age_days=89),
        ]
        deleted = function_deletions(builds, NOW)
        assert {d.build_id for d in deleted} == {"f-2", "f-3"}
        assert all("not pulled for 91 days" in d.reason for d in deleted)

    def test_at_most_ten_versions_per_function(self) -> None:
        builds = [stored(n) for n in range(12)] + [stored(n, "g") for n in range(3)]
        deleted = function_deletions(builds, NOW)
        # n grows older: the two oldest of f go, g keeps all three.
        assert [d.build_id for d in deleted] == ["f-10", "f-11"]
        assert "at most 10 kept" in deleted[0].reason

    def test_the_current_version_is_always_kept(self) -> None:
        builds = [stored(0, age_days=400, current=True)] + [stored(n) for n in range(1, 12)]
        deleted = {d.build_id for d in function_deletions(builds, NOW)}
        assert "f-0" not in deleted
        assert deleted == {"f-11"}  # ten newer non-current, plus the current one

    def test_a_shared_artifact_goes_with_its_last_build(self) -> None:
        shared = "artifact:" + "a" * 64
        builds = [
            stored(1, age_days=100, reference=shared),
            stored(2, "g", age_days=1, reference=shared),
        ]
        deletions = function_deletions(builds, NOW)
        assert [d.build_id for d in deletions] == ["f-1"]
        assert references_to_remove(builds, deletions) == set()

    def test_base_images_after_365_days_except_the_configured_one(self) -> None:
        images = [
            BaseImage("docker:calcgraph/python-base:old", NOW - timedelta(days=366), False),
            BaseImage("docker:calcgraph/python-base:recent", NOW - timedelta(days=364), False),
            BaseImage("docker:calcgraph/python-base:latest", NOW - timedelta(days=900), True),
        ]
        assert [d.reference for d in base_deletions(images, NOW)] == [
            "docker:calcgraph/python-base:old"
        ]


@pytest.fixture
def settings(
    database_url: str, identity_provider: LocalIdentityProvider, tmp_path: Path
) -> Settings:
    base = Settings(database_url=database_url, oidc_issuer=identity_provider.issuer, _env_file=None)
    return build_settings(base, tmp_path, retention_function_versions=2)


async def _build(client: httpx.AsyncClient, headers: dict[str, str], n: int) -> dict[str, str]:
    code = f"def main(x):\n    return x * {n}\n"
    response = await client.post(
        "/functions", json={"name": "scale", "code": code, "handler": "main:main"}, headers=headers
    )
    assert response.status_code == 201, response.text
    built: dict[str, str] = response.json()
    return built


async def test_cleanup_deletes_old_and_surplus_builds_under_a_controlled_clock(
    client: httpx.AsyncClient, bearer: Bearer, database: Database, settings: Settings
) -> None:
    builds = [await _build(client, bearer("alice"), n) for n in range(1, 5)]
    clock = datetime.now(UTC)
    async with database.write_session() as session:
        for age, built in zip((40, 30, 20, 10), builds, strict=True):
            await session.execute(
                update(Build)
                .where(Build.id == built["build_id"])
                .values(finished_at=clock - timedelta(days=age))
            )
    paths = [artifact_path(settings.build_dir, b["docker_image"]) for b in builds]
    assert all(p.is_dir() for p in paths)

    dry = await cleanup(database, settings, clock, dry_run=True)
    assert [d.build_id for d in dry.deletions] == [builds[1]["build_id"], builds[0]["build_id"]]
    assert dry.removed == ()
    assert all(p.is_dir() for p in paths)

    done = await cleanup(database, settings, clock)
    assert set(done.removed) == {builds[0]["docker_image"], builds[1]["docker_image"]}
    assert [p.is_dir() for p in paths] == [False, False, True, True]
    async with database.read_session() as session:
        statuses = {b["build_id"]: (await session.get(Build, b["build_id"])) for b in builds}
    assert [statuses[b["build_id"]].build_status for b in builds] == [  # type: ignore[union-attr]
        "expired", "expired", "success", "success"
    ]  # fmt: skip

    # 91 days later the newest non-current build is past the limit; the current one stays.
    later = await cleanup(database, settings, clock + timedelta(days=91))
    assert later.removed == (builds[2]["docker_image"],)
    assert paths[3].is_dir()
    assert (await cleanup(database, settings, clock + timedelta(days=91))).deletions == ()


def test_cleanup_command_dry_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALCGRAPH_")}
    env["CALCGRAPH_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    env["CALCGRAPH_BUILD_DIR"] = str(tmp_path / "builds")
    env["CALCGRAPH_SANDBOX"] = quick_sandbox()
    for command in (["migrate"], ["builds", "cleanup", "--dry-run"]):
        result = subprocess.run(
            [sys.executable, "-m", "calcgraph", *command],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
    assert "nothing to delete" in result.stdout
