"""Imports every feature's models so that the metadata (and Alembic) sees all tables."""

from calcgraph.db.base import Base
from calcgraph.domain.access.models import Membership, Organization, User
from calcgraph.domain.builds.models import Build
from calcgraph.domain.events.models import Event, EventCursor, Webhook, WebhookDelivery
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.jobs.models import Job
from calcgraph.domain.packages.models import (
    CodeBlob,
    Package,
    PackageVersion,
    PackageVersionDependency,
    PackageVersionFunction,
)
from calcgraph.domain.runs.models import ChainStart, NodeState, WorkflowRun
from calcgraph.domain.workflows.models import Workflow, WorkflowVersion

__all__ = [
    "Base",
    "Build",
    "ChainStart",
    "CodeBlob",
    "Event",
    "EventCursor",
    "Function",
    "FunctionVersion",
    "Job",
    "Membership",
    "NodeState",
    "Organization",
    "Package",
    "PackageVersion",
    "PackageVersionDependency",
    "PackageVersionFunction",
    "User",
    "Webhook",
    "WebhookDelivery",
    "Workflow",
    "WorkflowRun",
    "WorkflowVersion",
]
