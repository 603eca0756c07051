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


class EventRecord(Protocol):
    """An event as stored: a mapped `Event`, or a row of its table (a page's read)."""

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def recorded_at(self) -> datetime: ...
    @property
    def data(self) -> dict[str, Any] | None: ...
    @property
    def position(self) -> int | None: ...


def event_view(row: EventRecord) -> EventView:
    return EventView(
        id=row.id,
        type=row.type,
        subject=row.subject,
        time=row.recorded_at,
        data=dict(row.data or {}),
        position=int(row.position or 0),
    )
