"""An event as the doors answer it: the CloudEvents 1.0 attributes and `data`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from calcgraph.domain.events.catalog import SOURCE


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


class Stored(Protocol):
    """An event as stored: a mapped `Event`, or a row of the events table (a page's read)."""

    id: str
    type: str
    subject: str
    recorded_at: datetime
    data: dict[str, Any]
    position: int | None


def event_view(row: Stored) -> EventView:
    return EventView(
        id=row.id,
        type=row.type,
        subject=row.subject,
        time=row.recorded_at,
        data=dict(row.data or {}),
        position=int(row.position or 0),
    )
