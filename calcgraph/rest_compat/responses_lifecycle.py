"""Answers of the package lifecycle routes (contract 11), beside `responses.py` to keep both
small: each writes its domain view as it is (`as_viewed`)."""

from __future__ import annotations

from pydantic import Field

from calcgraph.domain.packages.views import (
    FunctionInterfaceView,
    PackageVersionDetailView,
)
from calcgraph.rest_compat.responses import Out, as_viewed


class FunctionInterfaceOut(Out):
    __annotations__ = as_viewed(FunctionInterfaceView)


class PackageVersionDetailOut(Out):
    __annotations__ = as_viewed(
        PackageVersionDetailView,
        functions=list[FunctionInterfaceOut],
        migration_guide=str | dict[str, str] | None,
    )


class InterfaceChangeOut(Out):
    function: str
    change: str
    port: str | None = Field(default=None, exclude_if=lambda v: v is None)
    breaking: bool
    reason: str


class PackageDiffOut(Out):
    package: str
    from_version: str
    to_version: str
    changes: list[InterfaceChangeOut]
