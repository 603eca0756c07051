"""GraphQL's one mapping of errors: contract kind in `extensions.code`, the rest masked."""

from __future__ import annotations

from graphql.error import GraphQLError
from strawberry.extensions import MaskErrors

from calcgraph.db.dialect import is_retryable
from calcgraph.domain.errors import DomainError, ValidationError


class ContractErrors(MaskErrors):
    """Domain errors keep their message and carry their kind as `extensions.code`; errors in
    the query document are `ValidationError`; anything unexpected is masked as `InternalError`."""

    def __init__(self) -> None:
        super().__init__(error_message="InternalError: an unexpected error occurred")

    def _process_errors(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        processed: list[GraphQLError] = []
        for error in errors:
            original = error.original_error
            if isinstance(original, RecursionError):
                # The parser recurses per nesting level: a deeply nested literal ends here.
                processed.append(
                    GraphQLError(
                        "the document is nested too deeply to parse",
                        extensions={"code": "ValidationError"},
                    )
                )
            elif original is None:
                error.extensions = {**(error.extensions or {}), "code": "ValidationError"}
                processed.append(error)
            elif isinstance(original, DomainError):
                extensions: dict[str, object] = {"code": original.kind, **original.extra}
                if isinstance(original, ValidationError):
                    extensions["errors"] = [e.as_dict() for e in original.errors]
                processed.append(
                    GraphQLError(
                        str(original),
                        nodes=error.nodes,
                        source=error.source,
                        positions=error.positions,
                        path=error.path,
                        original_error=original,
                        extensions=extensions,
                    )
                )
            elif error.path is None and (
                isinstance(original, GraphQLError) or error.message.startswith("Variable '$")
            ):
                # A variable of the wrong type, or missing, is refused while the variables are
                # coerced, before execution: the request's fault (contract section 8b).
                error.extensions = {**(error.extensions or {}), "code": "ValidationError"}
                processed.append(error)
            elif original is not None and is_retryable(original):
                # Contention or a pool with no free connection: the REST door's 503, here.
                processed.append(
                    GraphQLError(
                        "the database is busy; retry the request",
                        nodes=error.nodes,
                        path=error.path,
                        extensions={
                            "code": "Unavailable",
                            "retry_after": getattr(original, "retry_after", 1),
                        },
                    )
                )
            else:
                masked = self.anonymise_error(error)
                masked.extensions = {"code": "InternalError"}
                processed.append(masked)
        return processed
