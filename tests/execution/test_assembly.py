"""The worker assembly (`calcgraph.workers.assembly`): the sandbox pool only for actors that run
code, every actor of the registry declared on the broker it was given."""

from __future__ import annotations

import asyncio

import pytest

from calcgraph.domain.jobs.enqueue import Message
from calcgraph.settings import Settings
from calcgraph.workers import jobs, retention
from calcgraph.workers.actor import declare_actors
from calcgraph.workers.assembly import Workers
from calcgraph.workers.backbone import Backbone
from calcgraph.workers.broker import QUEUE, send
from calcgraph.workers.registry import ACTORS
from calcgraph.workers.runtime import CodeRuntime, WorkerRuntime

pytestmark = pytest.mark.db


def _settings(url: str, **overrides: object) -> Settings:
    return Settings(_env_file=None, database_url=url, **overrides)  # type: ignore[call-arg]


async def test_actors_that_run_no_code_get_no_sandbox(database_url: str) -> None:
    settings = _settings(database_url, sandbox="process")
    backbone = Backbone.build(settings)
    workers = Workers(settings, backbone, threads=1, own_process=False, actors=retention.ACTORS)
    assert type(workers.runtime) is WorkerRuntime
    assert not hasattr(workers.runtime, "pool")
    workers.start()
    try:
        assert set(backbone.broker.actors) == {retention.CLEANUP_ACTOR}
        send(backbone.broker, Message(retention.CLEANUP_ACTOR, {}))
        # The cleanup ran and succeeded (a failure is raised here), with no sandbox at all.
        await asyncio.to_thread(backbone.broker.join, QUEUE, timeout=30_000, fail_fast=True)
    finally:
        await asyncio.to_thread(workers.stop)
        backbone.broker.close()


async def test_a_code_actor_refuses_a_runtime_without_sandboxes(database_url: str) -> None:
    settings = _settings(database_url)
    backbone = Backbone.build(settings)
    runtime = WorkerRuntime(settings, backbone)
    try:
        with pytest.raises(TypeError, match="runs code"):
            declare_actors(backbone.broker, runtime, jobs.ACTORS)
    finally:
        await asyncio.to_thread(runtime.close)
        backbone.broker.close()


def test_the_registry_names_each_actor_once_and_says_which_run_code() -> None:
    names = [spec.name for spec in ACTORS]
    assert len(names) == len(set(names))
    assert {spec.name for spec in ACTORS if spec.runs_code} == {"jobs.run", "chains.run"}
    assert issubclass(CodeRuntime, WorkerRuntime)
