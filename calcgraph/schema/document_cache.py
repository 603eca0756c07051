"""Parsing and validating a query text once per process, not once per request.

Clients send the same few documents over and over (a UI polling a run), and validating one
walks every node of it through every rule: a few milliseconds each time. The answer depends
only on the text, the schema and the schema's rules, which are fixed when the schema is built,
so one cache per schema is keyed by the text (and the parser options). Only documents that
passed validation are remembered as documents: a refused one is validated again, so its errors
are always fresh objects (error processing rewrites them in place).

A refused text is remembered apart, as its answer (`Refusals`): the door answers the same text
again with the same errors without parsing it. A hostile client that sends a 5,000-token
document of aliases, or fragments that double each other, over and over had the event loop
parse it each time (a third of the loop in the soak of issue 27, `/health` waiting behind it);
a refusal depends on the text and the schema alone (parse errors, the rules, the bounds), never
on the caller or the variables, so its answer is the same for everyone.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from graphql import DocumentNode, GraphQLError
from strawberry.extensions import SchemaExtension

REFUSED_KEY = "calcgraph_refused_document"
"""The request state's note: the text of an operation refused before execution, for its text
alone."""
_MAX_REPLAYED_ERRORS = 100


class Replayed(GraphQLError):
    """An error answered again from `Refusals`: formatted exactly as it was the first time."""

    def __init__(self, formatted: dict[str, Any]) -> None:
        super().__init__(str(formatted.get("message", "")))
        self._formatted = formatted

    @property
    def formatted(self) -> Any:  # graphql-core's GraphQLFormattedError, a TypedDict
        return dict(self._formatted)


class Refusals:
    """The answers to texts refused before execution, least recently used first, keyed by a
    digest of the text (a refused text may be large: only its errors are kept)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._errors: OrderedDict[bytes, list[dict[str, Any]]] = OrderedDict()

    @staticmethod
    def key(query: str, operation_name: str | None, method: str) -> bytes:
        digest = hashlib.blake2b(digest_size=20)
        for part in (method, operation_name or "", query):
            digest.update(part.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
        return digest.digest()

    def get(self, key: bytes) -> list[GraphQLError] | None:
        found = self._errors.get(key)
        if found is None:
            return None
        self._errors.move_to_end(key)
        return [Replayed(error) for error in found]

    def put(self, key: bytes, errors: list[GraphQLError]) -> None:
        self._errors[key] = [dict(error.formatted) for error in errors[:_MAX_REPLAYED_ERRORS]]
        self._errors.move_to_end(key)
        while len(self._errors) > self.size:
            self._errors.popitem(last=False)


class DocumentCache:
    """The validated documents of one schema, least recently used first."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.refusals = Refusals(size)
        self._documents: OrderedDict[tuple[str, tuple[tuple[str, Any], ...]], DocumentNode] = (
            OrderedDict()
        )

    def extension(self) -> Callable[[], SchemaExtension]:
        """The schema extension factory that reads and fills this cache."""
        return _Factory(self)

    def get(self, key: tuple[str, tuple[tuple[str, Any], ...]]) -> DocumentNode | None:
        found = self._documents.get(key)
        if found is not None:
            self._documents.move_to_end(key)
        return found

    def put(self, key: tuple[str, tuple[tuple[str, Any], ...]], document: DocumentNode) -> None:
        self._documents[key] = document
        self._documents.move_to_end(key)
        while len(self._documents) > self.size:
            self._documents.popitem(last=False)


class _Factory:
    """Builds the extension per operation; the door finds the cache's refusals through it."""

    def __init__(self, cache: DocumentCache) -> None:
        self.cache = cache

    def __call__(self) -> SchemaExtension:
        return _CachedDocuments(self.cache)


def refusals_of(extensions: list[Any]) -> Refusals | None:
    """The refusals of the document cache among a schema's extensions, if it has one."""
    for extension in extensions:
        if isinstance(extension, _Factory):
            return extension.cache.refusals
    return None


def _mark_refused(context: Any) -> None:
    request = getattr(context.context, "request", None)
    state = getattr(request, "state", None)
    if state is not None:
        setattr(state, REFUSED_KEY, context.query)


class _CachedDocuments(SchemaExtension):
    def __init__(self, cache: DocumentCache) -> None:
        super().__init__()
        self.cache = cache
        self.hit = False

    def _key(self) -> tuple[str, tuple[tuple[str, Any], ...]] | None:
        context = self.execution_context
        if not context.query:
            return None
        key = (context.query, tuple(sorted(context.parse_options.items())))
        try:
            hash(key)
        except TypeError:  # an option this cache cannot key on: no caching
            return None
        return key

    def on_parse(self) -> Iterator[None]:
        context = self.execution_context
        key = self._key()
        if key is not None and context.graphql_document is None:
            document = self.cache.get(key)
            if document is not None:
                context.graphql_document = document
                self.hit = True
        yield
        if context.pre_execution_errors:  # the text could not be parsed (or had no document)
            _mark_refused(context)

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        if self.hit:
            context.pre_execution_errors = []  # validated when it was remembered
        yield
        key = self._key()
        document = context.graphql_document
        if not self.hit and key is not None and document is not None:
            if context.pre_execution_errors == []:
                self.cache.put(key, document)
        if context.pre_execution_errors:
            _mark_refused(context)
