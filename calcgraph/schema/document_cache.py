"""Parsing and validating a query text once per process, not once per request.

Clients send the same few documents over and over (a UI polling a run), and validating one
walks every node of it through every rule: a few milliseconds each time. The answer depends
only on the text, the schema and the schema's rules, which are fixed when the schema is built,
so one cache per schema is keyed by the text (and the parser options). Only documents that
passed validation are remembered: a refused one is validated again, so its errors are always
fresh objects (error processing rewrites them in place).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from graphql import DocumentNode
from strawberry.extensions import SchemaExtension


class DocumentCache:
    """The validated documents of one schema, least recently used first."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._documents: OrderedDict[tuple[str, tuple[tuple[str, Any], ...]], DocumentNode] = (
            OrderedDict()
        )

    def extension(self) -> Callable[[], SchemaExtension]:
        """The schema extension factory that reads and fills this cache."""
        cache = self

        def build() -> SchemaExtension:
            return _CachedDocuments(cache)

        return build

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
