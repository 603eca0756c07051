"""The result cache key: one user, one function version and its inputs after SI
normalisation. Pure.

Two calls that differ only in how a quantity was written (`{"value": 12, "unit": "kN"}` and
`12000`) normalise to the same resolved inputs and so share one cached result. The cache is
per user (contract section 8): another user's identical call is never answered from it, so a
`cache_hit` never tells a caller that someone else ran the same thing, nor hands them what it
returned (nor what a handler that peeks at its callers printed).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

RESULT_TTL_SECONDS = 3600.0
"""The specification's result cache lifetime (Limits: 1 hour)."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""Built once: `json.dumps` with options builds an encoder per call (a tick keys 1,000 jobs)."""


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces; floats as Python prints them."""
    return _CANONICAL.encode(value)


def result_key(user_id: str, function_version_id: str, resolved_inputs: Mapping[str, Any]) -> str:
    digest = hashlib.sha256()
    digest.update(user_id.encode())
    digest.update(b"\0")
    digest.update(function_version_id.encode())
    digest.update(b"\0")
    digest.update(canonical_json(dict(resolved_inputs)).encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class CachedResult:
    """A successful run's outputs (failures are never cached) and its logs."""

    outputs: dict[str, Any]
    logs: str = ""


class ResultLookup(Protocol):
    """The read side of the result cache, as the execute use case sees it."""

    async def get(self, key: str) -> CachedResult | None: ...

    async def get_many(self, keys: Sequence[str]) -> list[CachedResult | None]:
        """Each key's result, in order, in one round trip (a tick looks up all its jobs)."""
        ...


class _Refresh:
    """The lookup of `cache=refresh` (contract section 10): never answers, so the job runs;
    its worker stores the new result as any other."""

    async def get(self, key: str) -> CachedResult | None:
        return None

    async def get_many(self, keys: Sequence[str]) -> list[CachedResult | None]:
        return [None] * len(keys)


REFRESH: ResultLookup = _Refresh()
