"""Answers of the job routes (the job error is every door's)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from calcgraph.domain.jobs.views import JobView
from calcgraph.rest_compat.wire import Out, as_viewed

JobStatus = Literal["queued", "running", "success", "failed"]


class JobErrorOut(Out):
    model_config = ConfigDict(extra="allow")

    kind: str = Field(description="user_error, timeout, out_of_memory, sandbox_error, ...")
    message: str


class JobOut(Out):
    __annotations__ = as_viewed(
        JobView,
        exclude=("user_id",),
        status=JobStatus,
        error=JobErrorOut | None,
        logs=Annotated[
            str | None, Field(description="captured stdout and stderr, truncated to 64 KiB")
        ],
    )
