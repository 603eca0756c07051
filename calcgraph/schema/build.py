"""The GraphQL schema, composed at the root from each feature's Query and Mutation mixins."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

import strawberry
from graphql.error import GraphQLError
from strawberry.extensions import (
    DisableIntrospection,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
)
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext

from calcgraph.db import overloads
from calcgraph.db.dialect import is_retryable
from calcgraph.db.engine import Overloaded
from calcgraph.domain.errors import DomainError
from calcgraph.resolvers.access import AccessMutation, AccessQuery
from calcgraph.resolvers.catalog import CatalogQuery
from calcgraph.resolvers.deployments import DeploymentMutation, DeploymentQuery
from calcgraph.resolvers.events import EventQuery, EventSubscription
from calcgraph.resolvers.execute import ExecuteMutation
from calcgraph.resolvers.packages import PackageMutation, PackageQuery
from calcgraph.resolvers.webhooks import WebhookMutation, WebhookQuery
from calcgraph.resolvers.workflows import WorkflowMutation, WorkflowQuery, WorkflowSubscription
from calcgraph.schema.bounds import DocumentBounds
from calcgraph.schema.context import ReleaseLoaders
from calcgraph.schema.document_cache import DocumentCache
from calcgraph.schema.errors import ContractErrors
from calcgraph.schema.fast_execution import FastExecutionContext
from calcgraph.schema.telemetry import OperationLabel
from calcgraph.settings import Settings

log = logging.getLogger("calcgraph.graphql")


@strawberry.type(description="Read access to calcgraph.")
class Query(
    CatalogQuery,
    AccessQuery,
    PackageQuery,
    DeploymentQuery,
    WorkflowQuery,
    EventQuery,
    WebhookQuery,
):
    pass


@strawberry.type(description="Changes to calcgraph; each field is one transaction.")
class Mutation(
    AccessMutation,
    PackageMutation,
    DeploymentMutation,
    ExecuteMutation,
    WorkflowMutation,
    WebhookMutation,
):
    pass


@strawberry.type(description="Streams; over HTTP as multipart/mixed subscriptions.")
class Subscription(WorkflowSubscription, EventSubscription):
    pass


class Schema(strawberry.Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        # Expected failures (domain errors, bad query documents) are answers, not incidents;
        # a busy database (an overloaded pool, contention) is answered `Unavailable` with a
        # retry hint, as the REST door's 503 is, and logged as a warning like it.
        for error in errors:
            original = error.original_error
            if original is None or isinstance(original, DomainError):
                continue
            if isinstance(original, Overloaded):
                overloads.note(original)  # counted with the REST door's refusals
            elif is_retryable(original):
                log.warning("retryable database error (GraphQL): %s", original)
            else:
                log.error("unexpected GraphQL error", exc_info=original)


def build_schema(settings: Settings | None = None) -> strawberry.Schema:
    """The schema under the settings' `graphql_*` limits and introspection; without settings,
    under their defaults (the SDL export, tests), read without the environment."""
    if settings is None:
        settings = Settings.model_construct()
    # Limits against expensive documents: depth and aliases are counted through fragments,
    # tokens are counted by the parser before anything else runs.
    extensions: list[Callable[[], SchemaExtension]] = [
        ReleaseLoaders,
        ContractErrors,
        OperationLabel,
        partial(QueryDepthLimiter, max_depth=settings.graphql_max_depth),
        partial(MaxAliasesLimiter, max_alias_count=settings.graphql_max_aliases),
        partial(MaxTokensLimiter, max_token_count=settings.graphql_max_tokens),
    ]
    if not settings.graphql_introspection:
        extensions.append(DisableIntrospection)
    # Last: its rules are all above, fixed for this schema, so a text validated once stays valid.
    extensions.append(DocumentCache().extension())
    # After the cache (a remembered document was checked when it was validated), before the
    # rules strawberry runs: they expand fragments per spread, this check does it once.
    extensions.append(
        partial(
            DocumentBounds,
            max_selections=settings.graphql_max_selections,
            max_cost=settings.graphql_max_cost,
        )
    )
    return Schema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        extensions=extensions,
        # Suggestions ("did you mean ...?") would let a caller map a schema it cannot introspect.
        config=StrawberryConfig(disable_field_suggestions=True),
        # Long lists of plain objects (a run's 1,000 node states) skip per-field machinery.
        execution_context_class=FastExecutionContext,
    )
