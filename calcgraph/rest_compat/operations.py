"""What each REST route declares for the OpenAPI document: its body and query models (the same
ones it parses with), its answers and the contract errors it can give. Each routes module lists
its operations beside its routes; calcgraph.rest_compat.openapi turns them into the document."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from calcgraph.domain.access.paging import DEFAULT_LIMIT, MAX_LIMIT
from calcgraph.domain.execution.waits import EXECUTE_WAIT

# A success answer: a JSON model, or a media type for a non-JSON body (logs, pages), or None
# for an empty body (204).
Answer = type[BaseModel] | str | None


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    responses: Mapping[int, Answer]
    body: type[BaseModel] | None = None
    body_required: bool = True
    query: type[BaseModel] | None = None
    errors: tuple[int, ...] = ()
    """Contract statuses beyond those every route can give (see openapi.COMMON_ERRORS)."""
    tag: str = ""


class Query(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PageQuery(Query):
    """Listings (contract 4); parsed by calcgraph.domain.access.paging.PageRequest."""

    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="page size")
    cursor: str | None = Field(default=None, description="next_cursor of the previous page")


class ExecuteQuery(Query):
    wait: float = Field(
        default=EXECUTE_WAIT.default,
        ge=0,
        description="seconds to wait for the result (capped by the server); 0: answer at once",
    )
