"""Answers of the package and function listings."""

from __future__ import annotations

from calcgraph.domain.functions.views import FunctionView
from calcgraph.rest_compat.wire import Out, Timestamp, Visibility, as_viewed


class PackageOut(Out):
    id: str
    name: str
    visibility: Visibility
    owner: str
    organization: str | None
    description: str | None
    current_version: str | None
    created_at: Timestamp
    updated_at: Timestamp


class FunctionOut(Out):
    __annotations__ = as_viewed(FunctionView)
