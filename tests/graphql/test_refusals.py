"""A hostile document is refused without being parsed again (contract 8b: one user must not
stall the platform): the second answer to a refused text is the first one, given without the
parser or the validation rules; what depends on the caller or the variables is never replayed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
import strawberry.schema.schema as strawberry_schema

Bearer = Callable[..., dict[str, str]]

ALIASES = "{ " + " ".join(f"a{i}: me {{ username }}" for i in range(2000)) + " }"


def _doubling_fragments(levels: int) -> str:
    parts = [f"query Q {{ ...F{levels} }}", "fragment F0 on Query { me { username } }"]
    parts += [f"fragment F{i} on Query {{ ...F{i - 1} ...F{i - 1} }}" for i in range(1, levels + 1)]
    return "\n".join(parts)


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    parse = strawberry_schema.parse  # type: ignore[attr-defined]

    def counting(source: Any, **kwargs: Any) -> Any:
        seen.append(str(source)[:40])
        return parse(source, **kwargs)

    monkeypatch.setattr(strawberry_schema, "parse", counting)
    return seen


async def _post(
    client: httpx.AsyncClient, headers: dict[str, str], query: str, **extra: Any
) -> httpx.Response:
    return await client.post("/graphql", json={"query": query, **extra}, headers=headers)


@pytest.mark.parametrize(
    "document",
    [ALIASES, _doubling_fragments(30), "{ noSuchField }", "{ me { "],
    ids=["tokens", "doubling-fragments", "unknown-field", "syntax"],
)
async def test_a_refused_text_is_answered_again_without_parsing(
    client: httpx.AsyncClient, bearer: Bearer, parses: list[str], document: str
) -> None:
    first = await _post(client, bearer("mallory"), document)
    assert first.json()["data"] is None
    assert [e["extensions"]["code"] for e in first.json()["errors"]] == ["ValidationError"] * len(
        first.json()["errors"]
    )
    parsed = len(parses)
    assert parsed == 1
    for caller in ("mallory", "mallory", "alice"):  # a refusal is the text's, for everyone
        again = await _post(client, bearer(caller), document)
        assert again.status_code == first.status_code
        assert again.json() == first.json()
    assert len(parses) == parsed


async def test_an_accepted_text_still_runs_for_each_caller(
    client: httpx.AsyncClient, bearer: Bearer, parses: list[str]
) -> None:
    for caller in ("alice", "bob", "alice"):
        body = (await _post(client, bearer(caller), "{ me { username } }")).json()
        assert body == {"data": {"me": {"username": caller}}}


async def test_a_refusal_of_the_variables_is_not_remembered(
    client: httpx.AsyncClient, bearer: Bearer
) -> None:
    query = "query($limit: Int) { jobs(limit: $limit) { items { id } } }"
    wrong = await _post(client, bearer("alice"), query, variables={"limit": "many"})
    assert [e["extensions"]["code"] for e in wrong.json()["errors"]] == ["ValidationError"]
    right = await _post(client, bearer("alice"), query, variables={"limit": 5})
    assert right.json() == {"data": {"jobs": {"items": []}}}


async def test_a_refusal_is_per_operation_name(client: httpx.AsyncClient, bearer: Bearer) -> None:
    document = "query A { me { username } } query B { noSuchField }"
    refused = await _post(client, bearer("alice"), document, operationName="B")
    assert refused.json()["data"] is None
    other = await _post(client, bearer("alice"), "query A { me { username } }", operationName="A")
    assert other.json() == {"data": {"me": {"username": "alice"}}}
