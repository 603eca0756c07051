"""Which function an execute call names: every form of the specification. Pure.

POST /functions/{function_id}/execute                            -> by_function_id
POST /packages/{package_id or name}/functions/{function}/execute -> latest of that function
POST /packages/{package}/functions/{function}@{version}/execute  -> that version (`@latest`)
POST /packages/{package}@{version}/functions/{function}/execute  -> that package deployment
"""

from __future__ import annotations

from dataclasses import dataclass

from calcgraph.domain.errors import InvalidRequest
from calcgraph.domain.packages.addressing import split_selector


@dataclass(frozen=True)
class ExecuteAddress:
    function_id: str | None = None
    """A function's immutable id (its current version), or a function version's id (exactly it)."""
    package: str | None = None
    """A package id or name."""
    package_selector: str | None = None
    function: str | None = None
    function_selector: str | None = None

    @classmethod
    def by_function_id(cls, function_id: str) -> ExecuteAddress:
        return cls(function_id=function_id)

    @classmethod
    def by_path(cls, package_segment: str, function_segment: str) -> ExecuteAddress:
        package, package_selector = split_selector(package_segment)
        function, function_selector = split_selector(function_segment)
        if not package or not function or package_selector == "" or function_selector == "":
            raise InvalidRequest(
                "expected /packages/{package}[@version]/functions/{name}[@version]"
            )
        if package_selector is not None and function_selector is not None:
            raise InvalidRequest(
                "name a package version or a function version, not both "
                f"({package_segment}/functions/{function_segment})"
            )
        return cls(None, package, package_selector, function, function_selector)
