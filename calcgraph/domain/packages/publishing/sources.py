"""The port through which publishing reads a package's source from elsewhere (git today):
the domain says what it needs, the adapter (`calcgraph.sources.git.GitSources`) how."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class SourceCheckout(Protocol):
    @property
    def ref_kind(self) -> str:
        """`tag`, `branch` or `commit`: how the ref was resolved."""
        ...

    @property
    def commit(self) -> str:
        """Full SHA of the checked-out commit."""
        ...

    @property
    def files(self) -> Mapping[str, bytes]:
        """Every regular file of the commit by POSIX path."""
        ...


class SourceFetcher(Protocol):
    async def fetch(self, url: str, ref: str) -> SourceCheckout:
        """`ref` of the repository at `url`, within the operator's bounds; InvalidRequest,
        NotFound or ValidationError when it cannot be had."""
        ...
