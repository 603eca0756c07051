"""What both sides of the job queue share, in the API process and in every worker process: the
broker, the result cache, the completion notifier and the runs' change tokens. Redis when
`CALCGRAPH_REDIS_URL` is set (shared by every process), in-process otherwise."""

from __future__ import annotations

from dataclasses import dataclass

import dramatiq

from calcgraph.settings import Settings
from calcgraph.workers.broker import build_broker
from calcgraph.workers.notify import LocalNotifier, Notifier, RedisNotifier
from calcgraph.workers.result_cache import InProcessResultCache, RedisResultCache, ResultCache
from calcgraph.workers.run_changes import LocalRunChanges, RedisRunChanges, RunChangeStore


@dataclass(frozen=True)
class Backbone:
    broker: dramatiq.Broker
    cache: ResultCache
    notifier: Notifier
    changes: RunChangeStore
    """The runs' change tokens (`calcgraph.domain.runs.changes`)."""

    @classmethod
    def build(cls, settings: Settings) -> Backbone:
        broker = build_broker(settings)
        if settings.redis_url is not None:
            url = settings.redis_url.get_secret_value()
            prefix = settings.redis_key_prefix
            notifier = RedisNotifier(url, prefix)
            changes = RedisRunChanges(url, prefix)
            changes.follow(notifier)
            return cls(
                broker,
                RedisResultCache(url, settings.result_cache_ttl_seconds, prefix),
                notifier,
                changes,
            )
        return cls(
            broker,
            InProcessResultCache(settings.result_cache_ttl_seconds),
            LocalNotifier(),
            LocalRunChanges(),
        )
