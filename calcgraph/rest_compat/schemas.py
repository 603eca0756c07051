"""Request bodies and the shared query of the REST routes, as pydantic models: the operations
parse with them and the OpenAPI document describes them. A query used by one route only sits
beside its route."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from calcgraph.domain.listing.paging import DEFAULT_LIMIT, MAX_LIMIT, PageRequest
from calcgraph.rest_compat.parsing import BlankIsAbsent, Query, Refusal


def _type_expression(value: Any) -> Any:
    if not isinstance(value, str | dict):
        raise ValueError(
            "a type expression is a string such as 'list[Force]', or an object mapping "
            "field names to type expressions"
        )
    return value


TypeExpression = Annotated[str | dict[str, Any], BeforeValidator(_type_expression)]


# Examples of the OpenAPI document; tests/openapi sends each to its route.
_BEAM_SOURCE = "def cantilever(length, force):\n    return {'moment': force * length}\n"
_PACKAGE_EXAMPLE: dict[str, Any] = {
    "manifest": {
        "kind": "package",
        "version": 1,
        "package": {"name": "beam-tools", "version": "1.0.0", "versioning_strategy": "auto"},
        "functions": {
            "cantilever": {
                "handler": "beam:cantilever",
                "inputs": {
                    "length": {"type": "Length", "description": "span", "required": True},
                    "force": {"type": "Force", "description": "tip load", "required": True},
                },
                "outputs": {"moment": {"type": "Moment", "description": "root moment"}},
            }
        },
    },
    "files": {"beam.py": _BEAM_SOURCE},
    "visibility": "private",
}
_FUNCTION_EXAMPLE: dict[str, Any] = {
    "name": "moment",
    "code": _BEAM_SOURCE.replace("cantilever", "main"),
    "inputs": {"length": {"type": "Length"}, "force": {"type": "Force"}},
    "outputs": {"moment": {"type": "Moment"}},
}
_GRAPH_EXAMPLE: dict[str, Any] = {
    "nodes": [
        {"node_key": "span", "kind": "input", "input_spec": {"type_expr": "Length"}},
        {"node_key": "load", "kind": "input", "input_spec": {"type_expr": "Force"}},
        {
            "node_key": "beam",
            "kind": "function",
            "function": "beam-tools/cantilever",
            "input_bindings": {
                "length": {"source": "input_node", "input_key": "span", "from_port": "value"},
                "force": {"source": "input_node", "input_key": "load", "from_port": "value"},
            },
        },
    ]
}


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckConnectionBody(Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"source": "Force", "target": "Numeric"}]}
    )

    source: TypeExpression = Field(description="type expression of the source port")
    target: TypeExpression = Field(description="type expression of the target port")


class LoginCallbackBody(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"code": "4f1c2a", "code_verifier": "v" * 43, "state": "b3e1"}]
        }
    )

    code: str = Field(min_length=1, max_length=4096, description="authorization code")
    code_verifier: str = Field(
        min_length=43, max_length=128, description="the PKCE verifier POST /auth/login gave"
    )
    state: str | None = Field(default=None, description="echoed state; checked by the client")


class CreateOrganizationBody(Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"slug": "acme", "name": "Acme Engineering"}]}
    )

    slug: str = Field(min_length=1, max_length=100, description="lowercase, digits, dashes")
    name: str = Field(min_length=1, max_length=255, description="display name")


class AddMemberBody(Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"username": "bob", "role": "member"}]}
    )

    username: str = Field(min_length=1, max_length=255, description="an existing user")
    role: Literal["member", "owner"] = Field(default="member", description="member or owner")


VisibilityValue = Literal["private", "internal", "public"]


class PublishPackageBody(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [_PACKAGE_EXAMPLE]})

    manifest: dict[str, Any] | str = Field(
        description="calcgraph.yaml as an object (its JSON form) or as YAML text"
    )
    files: dict[str, str] = Field(description="path of each package file to its source text")
    visibility: VisibilityValue | None = Field(
        default=None, description="new package: default private; existing: unchanged if unset"
    )
    organization: str | None = Field(
        default=None, max_length=100, description="owning organization's slug"
    )


class PublishFromGitBody(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "git_url": "https://git.example.org/acme/beam-tools.git",
                    "ref": "v1.2.0",
                    "visibility": "internal",
                }
            ]
        }
    )

    git_url: str = Field(
        min_length=1,
        max_length=2048,
        description="https:// URL, or a file:// URL or path inside CALCGRAPH_GIT_LOCAL_ROOTS",
    )
    ref: str = Field(min_length=1, max_length=255, description="tag, branch or commit SHA")
    visibility: VisibilityValue | None = Field(
        default=None, description="new package: default private; existing: unchanged if unset"
    )
    organization: str | None = Field(
        default=None, max_length=100, description="owning organization's slug"
    )


class PatchPackageBody(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"visibility": "internal"}]})

    visibility: VisibilityValue = Field(description="private, internal or public")


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


class CreateWorkflowBody(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"slug": "cantilever-check", "name": "Cantilever check", "graph": _GRAPH_EXAMPLE}
            ]
        }
    )

    slug: str = Field(
        min_length=1,
        max_length=100,
        pattern=r"^[a-z0-9][a-z0-9-]*$",
        description="lowercase, digits, dashes",
    )
    name: str = Field(min_length=1, max_length=255, description="display name")
    graph: dict[str, Any] = Field(description='the graph document {"nodes": [...]}')
    visibility: VisibilityValue | None = Field(default=None, description="default private")
    organization: str | None = Field(
        default=None, max_length=100, description="owning organization's slug"
    )


class WorkflowGraphBody(Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"graph": _GRAPH_EXAMPLE}]})

    graph: dict[str, Any] = Field(description='the graph document {"nodes": [...]}')


class CreateRunBody(Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"inputs": {"span": 2.0, "load": {"value": 12, "unit": "kN"}}}]
        }
    )

    inputs: dict[str, Any] = Field(
        default={}, description="input node_key to a value matching its type_expr"
    )
    cache: Literal["refresh"] | None = Field(
        default=None,
        description="`refresh`: no job of the run is answered from the result cache; each "
        "stores its new result (contract 10)",
    )


class RerunBody(Body):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"from": "failure", "inputs": {"span": 2.5}}]},
        populate_by_name=True,
    )

    start_from: Literal["failure", "start"] = Field(
        default="failure",
        alias="from",
        description="failure: nodes that succeeded with the same function version and inputs "
        "are reused; start: every node runs again",
    )
    workflow_version: Literal["same", "latest"] = Field(
        default="same", description="the original run's workflow version, or the latest"
    )
    inputs: dict[str, Any] = Field(
        default={}, description="overrides of the original run's inputs, by input node_key"
    )


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


class PageQuery(Query):
    """Listings (contract 4)."""

    limit: Annotated[
        int,
        BlankIsAbsent,
        Refusal(
            f"limit must be an integer from 1 to {MAX_LIMIT}", f"an integer from 1 to {MAX_LIMIT}"
        ),
    ] = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="page size")
    cursor: str | None = Field(default=None, description="next_cursor of the previous page")

    def page(self) -> PageRequest:
        return PageRequest.parse(self.limit, self.cursor)


class SearchQuery(PageQuery):
    """Listings searched by name (`domain.listing.filters`)."""

    search: str | None = Field(
        default=None, description="a case-insensitive part of the name (at most 200 characters)"
    )


INSTANT_HELP = "an ISO 8601 date (midnight UTC) or date-time"
