"""Reading a run's node states a page at a time (GraphQL `nodeStates(first, after, status)` and
`nodeState(key)`). Only for runs the caller already read through the run service, which
checked access: like the other relation loaders, these add no check of their own."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.runs.nodes.repository import NodePageRepository
from calcgraph.domain.runs.views import NodeRow

NODE_STATUSES = ("pending", "running", "success", "failed", "cancelled")
MAX_PAGE = 10_000


def check_page(first: int | None, statuses: Sequence[str]) -> None:
    """Refuse a page size or a status no page can have, naming what is allowed."""
    if first is not None and not 1 <= first <= MAX_PAGE:
        raise ValidationError(
            f"first must be 1 to {MAX_PAGE:,}",
            [FieldError(("first",), f"expected 1 to {MAX_PAGE}, got {first}")],
        )
    for status in statuses:
        if status not in NODE_STATUSES:
            raise ValidationError(
                f"unknown node status {status!r}",
                [FieldError(("status",), f"one of {', '.join(NODE_STATUSES)}")],
            )


class NodePageService:
    async def pages(
        self,
        session: AsyncSession,
        run_ids: Sequence[str],
        *,
        after: str | None,
        first: int | None,
        statuses: Sequence[str],
    ) -> dict[str, list[NodeRow]]:
        """run id -> its page, in node key order."""
        check_page(first, statuses)
        found: dict[str, list[NodeRow]] = {run_id: [] for run_id in run_ids}
        rows = await NodePageRepository.from_session(session).pages(
            run_ids, after=after, limit=first, statuses=statuses
        )
        for row in rows:
            found[row.run_id].append(row)
        return found

    async def by_keys(
        self, session: AsyncSession, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], NodeRow]:
        rows = await NodePageRepository.from_session(session).by_keys(keys)
        return {(row.run_id, row.node_key): row for row in rows}


node_page_service = NodePageService()
