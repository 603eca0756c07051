"""Logging for `serve` and `worker`: one JSON object per line (or plain text on a terminal),
each record carrying the request id or the job id of the work it was logged under."""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from typing import IO, Literal

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from calcgraph.settings import Settings

request_id: ContextVar[str | None] = ContextVar("calcgraph_request_id", default=None)
job_id: ContextVar[str | None] = ContextVar("calcgraph_job_id", default=None)

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s%(job_id)s] %(message)s"


class ContextFilter(logging.Filter):
    """Copies the context's ids onto every record, so each formatter and handler sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        if not hasattr(record, "job_id"):
            record.job_id = job_id.get()
        return True


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # Absent ids print as nothing rather than "None".
        saved = record.request_id, record.job_id  # type: ignore[attr-defined]
        record.request_id = saved[0] or ""
        record.job_id = f" job={saved[1]}" if saved[1] else ""
        try:
            return super().format(record)
        finally:
            record.request_id, record.job_id = saved


def json_formatter() -> logging.Formatter:
    # `timestamp=True`: ISO 8601 in UTC with microseconds, from the record's creation time.
    return JsonFormatter(
        # `process`: the pid, which tells apart the processes of `serve --workers N`.
        "{levelname}{name}{message}{request_id}{job_id}{process}",
        style="{",
        rename_fields={"levelname": "level", "name": "logger"},
        # uvicorn repeats its messages with terminal colours: not for a log pipeline.
        reserved_attrs=[*RESERVED_ATTRS, "color_message"],
        timestamp=True,
    )


def resolve_format(settings: Settings, stream: IO[str]) -> Literal["json", "text"]:
    if settings.log_format is not None:
        return settings.log_format
    isatty = getattr(stream, "isatty", None)
    return "text" if callable(isatty) and isatty() else "json"


def setup_logging(settings: Settings, stream: IO[str] | None = None) -> logging.Handler:
    """Replace the root logger's handlers with one that writes `settings.log_format` to
    `stream` (stderr). uvicorn's loggers propagate here (serve passes `log_config=None`)."""
    stream = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    if resolve_format(settings, stream) == "json":
        handler.setFormatter(json_formatter())
    else:
        handler.setFormatter(_TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    return handler
