"""Bodies and answers of the organization routes."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from calcgraph.domain.access.views import MemberView, OrganizationView
from calcgraph.rest_compat.wire import Body, Out, as_viewed


class MemberOut(Out):
    __annotations__ = as_viewed(MemberView, role=Literal["member", "owner"])


class OrganizationOut(Out):
    __annotations__ = as_viewed(OrganizationView, members=list[MemberOut])


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
