"""Answers of the event routes (contract section 9)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from calcgraph.rest_compat.wire import Out


class EventOut(Out):
    """A CloudEvents 1.0 event in structured mode."""

    specversion: str = Field(description='"1.0"')
    id: str = Field(description="unique; the same on every delivery of the event")
    source: str = Field(description='"calcgraph"')
    type: str = Field(description="e.g. calcgraph.job.failed")
    subject: str = Field(description="the id of what the event is about")
    time: str = Field(description="RFC 3339, UTC", json_schema_extra={"format": "date-time"})
    datacontenttype: str = Field(description='"application/json"')
    data: dict[str, Any]


class EventPageOut(Out):
    items: list[EventOut]
    next_cursor: str = Field(description="pass as `after` for the next call; never null")
