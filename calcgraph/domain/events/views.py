"""An event as the doors answer it: the CloudEvents 1.0 attributes and `data`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from calcgraph.domain.events.catalog import SOURCE
from calcgraph.domain.events.models import Event


@dataclass(frozen=True)
class EventView:
    id: str
    type: str
    subject: str
    time: datetime
    data: dict[str, Any]
    position: int
    source: str = SOURCE
    specversion: str = "1.0"
    datacontenttype: str = "application/json"


def event_view(row: Event | Row[Any]) -> EventView:
    """A mapped event, or a row of the events table (a page reads rows)."""
    return EventView(
        id=row.id,
        type=row.type,
        subject=row.subject,
        time=row.recorded_at,
        data=dict(row.data or {}),
        position=int(row.position or 0),
    )
