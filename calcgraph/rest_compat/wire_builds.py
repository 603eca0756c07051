"""The body and answer of the function build route."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from calcgraph.domain.builds.service import BuildOutcome
from calcgraph.domain.builds.submission import format_duration, format_size
from calcgraph.rest_compat.wire import Body, Out, VisibilityValue, read_from, view_attributes
from calcgraph.rest_compat.wire_publish import BEAM_SOURCE

_FUNCTION_EXAMPLE: dict[str, Any] = {
    "name": "moment",
    "code": BEAM_SOURCE.replace("cantilever", "main"),
    "inputs": {"length": {"type": "Length"}, "force": {"type": "Force"}},
    "outputs": {"moment": {"type": "Moment"}},
}


class SubmitFunctionBody(Body):
    """`POST /functions` (contract 4); the rules on code and requirements are the service's,
    so that each refusal names its rule and line."""

    model_config = ConfigDict(json_schema_extra={"examples": [_FUNCTION_EXAMPLE]})

    name: str = Field(min_length=1, max_length=100, description="function (and package) name")
    code: str = Field(description="source of module main")
    requirements: list[str] = Field(default=[], description="pip requirements, e.g. 'a==1.2'")
    handler: str = Field(default="main:main", description="main:<callable>")
    inputs: dict[str, Any] | None = Field(default=None, description="typed input ports")
    outputs: dict[str, Any] | None = Field(default=None, description="typed output ports")
    visibility: VisibilityValue | None = Field(
        default=None, description="new function: default private; existing: unchanged if unset"
    )
    organization: str | None = Field(default=None, description="owning organization slug")


def _answer(outcome: BuildOutcome) -> dict[str, Any]:
    return {
        **view_attributes(outcome),
        "image_size": format_size(outcome.image_size_bytes or 0),
        "build_time": format_duration(outcome.build_seconds),
        "log": f"/functions/{outcome.function_id}/builds/{outcome.build_id}/log",
    }


class BuildOut(Out):
    """The specification's build response, plus the identifiers a client needs next."""

    function_id: str
    status: str
    docker_image: str | None
    image_size: str
    build_time: str
    vulnerabilities: dict[str, Any]
    build_id: str
    function_version_id: str | None
    version: str | None
    version_status: str | None
    package_version: str | None
    log: str = Field(description="path of the build log")

    _from_outcome = read_from(BuildOutcome, _answer)
