"""Request bodies of the REST routes, as pydantic models (the OpenAPI document uses them too)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _type_expression(value: Any) -> Any:
    if not isinstance(value, str | dict):
        raise ValueError(
            "a type expression is a string such as 'list[Force]', or an object mapping "
            "field names to type expressions"
        )
    return value


TypeExpression = Annotated[str | dict[str, Any], BeforeValidator(_type_expression)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CheckConnectionBody(Body):
    source: TypeExpression = Field(description="type expression of the source port")
    target: TypeExpression = Field(description="type expression of the target port")


class LoginCallbackBody(Body):
    code: str = Field(min_length=1, max_length=4096, description="authorization code")
    code_verifier: str = Field(
        min_length=43, max_length=128, description="the PKCE verifier POST /auth/login gave"
    )
    state: str | None = Field(default=None, description="echoed state; checked by the client")


class CreateOrganizationBody(Body):
    slug: str = Field(min_length=1, max_length=100, description="lowercase, digits, dashes")
    name: str = Field(min_length=1, max_length=255, description="display name")


class AddMemberBody(Body):
    username: str = Field(min_length=1, max_length=255, description="an existing user")
    role: Literal["member", "owner"] = Field(default="member", description="member or owner")


VisibilityValue = Literal["private", "internal", "public"]


class PublishPackageBody(Body):
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
    git_url: str = Field(min_length=1, max_length=2048, description="https:// or file:// URL")
    ref: str = Field(min_length=1, max_length=255, description="tag, branch or commit SHA")
    visibility: VisibilityValue | None = Field(
        default=None, description="new package: default private; existing: unchanged if unset"
    )
    organization: str | None = Field(
        default=None, max_length=100, description="owning organization's slug"
    )


class PatchPackageBody(Body):
    visibility: VisibilityValue = Field(description="private, internal or public")


class SubmitFunctionBody(Body):
    """`POST /functions` (contract 4); the rules on code and requirements are the service's,
    so that each refusal names its rule and line."""

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
    graph: dict[str, Any] = Field(description='the graph document {"nodes": [...]}')


class CreateRunBody(Body):
    inputs: dict[str, Any] = Field(
        default={}, description="input node_key to a value matching its type_expr"
    )
