"""An event's CloudEvents 1.0 envelope, made by the CloudEvents SDK (`cloudevents`): the
structured-mode object of an answer or a subscription, and the JSON body of a webhook
delivery (`application/cloudevents+json`). The SDK validates the required attributes."""

from __future__ import annotations

from datetime import UTC
from typing import Any

from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from calcgraph.domain.events.views import EventView

CONTENT_TYPE = "application/cloudevents+json"
_FORMAT = JSONFormat()


def cloudevent(view: EventView) -> CloudEvent:
    return CloudEvent(
        {
            "specversion": view.specversion,
            "id": view.id,
            "source": view.source,
            "type": view.type,
            "subject": view.subject,
            "time": view.time.astimezone(UTC),
            "datacontenttype": view.datacontenttype,
        },
        view.data,
    )


def structured(view: EventView) -> dict[str, Any]:
    """The structured-mode object, `time` written in RFC 3339 (`...Z`)."""
    event = cloudevent(view)
    attributes = dict(event.get_attributes())
    time = event.get_time()
    if time is not None:
        attributes["time"] = time.isoformat().replace("+00:00", "Z")
    return {**attributes, "data": event.get_data()}


def body(view: EventView) -> bytes:
    """The event as a webhook delivers it: the SDK's JSON event format."""
    return _FORMAT.write(cloudevent(view))
