"""The body and answer of the execute routes (contract 4)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

from calcgraph.domain.jobs.views import Executed, JobView
from calcgraph.rest_compat.wire import Out, is_none
from calcgraph.rest_compat.wire_jobs import JobErrorOut, JobStatus


class ExecuteBody(BaseModel):
    """Execute routes (contract 4). Read leniently: an empty body means no inputs, other keys
    are ignored; the inputs are checked against the function's typed inputs by the service
    (which words the refusal of inputs that are not an object)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"inputs": {"length": 2.0, "force": 1000.0}}]}
    )

    inputs: Annotated[object, WithJsonSchema({"type": "object", "additionalProperties": True})] = (
        Field(
            default={}, description="input port name to value; physical values may be {value, unit}"
        )
    )


class ExecuteOut(Out):
    """200 when the job ended within `wait` (outputs or error), else 202 (queued or running)."""

    job_id: str
    status: JobStatus
    outputs: dict[str, Any] | None = Field(default=None, exclude_if=is_none)
    error: JobErrorOut | None = Field(default=None, exclude_if=is_none)
    warnings: list[str] | None = Field(
        default=None,
        exclude_if=is_none,
        description="present when the function version is deprecated (contract 11)",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_job(cls, value: Any) -> Any:
        warnings: tuple[str, ...] = ()
        if isinstance(value, Executed):
            value, warnings = value.job, value.warnings
        if not isinstance(value, JobView):
            return value
        body: dict[str, Any] = {"job_id": value.id, "status": value.status}
        if value.status == "success":
            body["outputs"] = value.outputs
        elif value.status == "failed":
            body["error"] = value.error
        if warnings:
            body["warnings"] = list(warnings)
        return body
