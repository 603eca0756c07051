"""The typed GraphQL context, built once per request."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import strawberry
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.dataloader import DataLoader
from strawberry.extensions import SchemaExtension

from calcgraph.db.engine import Database
from calcgraph.domain import answers
from calcgraph.domain.access.principal import Principal
from calcgraph.schema.access_loaders import AccessLoaders
from calcgraph.schema.node_loaders import NodeLoaders
from calcgraph.schema.package_loaders import PackageLoaders
from calcgraph.schema.workflow_loaders import WorkflowLoaders
from calcgraph.services import Services
from calcgraph.settings import Settings

VALUES_BYTES = answers.ANSWER_MAX_BYTES - 4 * 1024 * 1024
"""An operation's node outputs and terminal outputs: the answer's bound less what its whole
values (a plan, a graph: 2 MiB each in the document's estimate) may take."""


@dataclass
class Context:
    request: Request | WebSocket
    response: Response | None
    services: Services
    """What the resolvers reach in the application (the REST routes' `services_of`)."""
    principal: Principal | None = None
    """Set by the authentication middleware when the request carried a valid token."""
    access_loaders: AccessLoaders | None = None
    package_loaders: PackageLoaders | None = None
    """Loaders of package and function versions, built on first use in the request."""
    workflow_loaders: WorkflowLoaders | None = None
    """Loaders of the run graph (versions, node states, jobs), built on first use."""
    node_loaders: NodeLoaders | None = None
    """Loaders of node state pages and single node states, built on first use."""
    values: answers.Budget = field(default_factory=lambda: answers.Budget(VALUES_BYTES))
    """What the operation's node outputs and terminal outputs may still show (contract 8b):
    past it they are left out (`outputsOmitted`), whatever the rows its listings hold."""

    @property
    def database(self) -> Database:
        return self.services.database

    @property
    def settings(self) -> Settings:
        return self.services.settings

    def renew_loaders(self) -> None:
        """Start a new act of reading: each push of a subscription. Loaders remember what they
        read, under the access decided when they read it, for as long as the context lives
        (a subscription's, a WebSocket connection's); a later push reads afresh, so its
        nested fields show current rows under current rules."""
        principal = self.principal
        self.access_loaders = (
            AccessLoaders.build(self.database, principal) if principal is not None else None
        )
        self.package_loaders = None
        self.workflow_loaders = None
        self.node_loaders = None
        self.values = answers.Budget(VALUES_BYTES)

    def release_loaders(self) -> None:
        """The operation is answered: what its loaders remember goes now. Loaders sit in
        reference cycles (loader, batch, futures; context, request) that only a full
        collection frees, and a whole run's query leaves 20,000 node rows in them: the server
        grew by 2 to 3 MB a query until one ran. Cleared, the rows go by reference count."""
        for loaders in (
            self.access_loaders,
            self.package_loaders,
            self.workflow_loaders,
            self.node_loaders,
        ):
            for loader in vars(loaders).values() if loaders is not None else ():
                if isinstance(loader, DataLoader):
                    loader.clear_all()
        # Built again on first use, should anything still read (a subscription's next push).
        self.package_loaders = None
        self.workflow_loaders = None
        self.node_loaders = None
        self.values = answers.Budget(VALUES_BYTES)


class ReleaseLoaders(SchemaExtension):
    """Releases the request's loaders once its operation is answered."""

    def on_operation(self) -> Iterator[None]:
        yield
        context = self.execution_context.context
        if isinstance(context, Context):
            context.release_loaders()


Info = strawberry.Info[Context, None]
