"""The Python client of calcgraph's REST API: `Client` (sync) and `AsyncClient` (asyncio).

    from calcgraph.client import Client, quantity

    cg = Client("http://127.0.0.1:8000", token)
    report = cg.publish_directory("calcgraph/demo/package")
    result = cg.execute("demo-beam/cantilever", {"length": quantity(3, "m"), ...})

Errors raise one class per contract kind (`NotFound`, `ValidationError`, ...), all
`CalcgraphError`s with `.status`, `.kind`, `.detail`, `.errors` and `.report`.
"""

from calcgraph.client.aio import AsyncClient
from calcgraph.client.errors import (
    CalcgraphError,
    Conflict,
    ConnectionError,
    InternalError,
    InvalidRequest,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    Unauthenticated,
    Unavailable,
    ValidationError,
)
from calcgraph.client.models import (
    DeploymentReport,
    ExecuteResult,
    Function,
    FunctionDetail,
    Job,
    Member,
    NodeState,
    Organization,
    Package,
    Page,
    Run,
    RunPlan,
    RunSummary,
    Workflow,
    WorkflowDetail,
    WorkflowValidation,
)
from calcgraph.client.settings import ClientSettings
from calcgraph.client.sync import Client
from calcgraph.client.values import parse_quantity, parse_value, quantity
from calcgraph.client.webhooks import InvalidSignature, verify_webhook

__all__ = [
    "InvalidSignature",
    "verify_webhook",
    "AsyncClient",
    "CalcgraphError",
    "Client",
    "ClientSettings",
    "Conflict",
    "ConnectionError",
    "DeploymentReport",
    "ExecuteResult",
    "Function",
    "FunctionDetail",
    "InternalError",
    "InvalidRequest",
    "Job",
    "MethodNotAllowed",
    "Member",
    "NodeState",
    "NotAcceptable",
    "NotFound",
    "Organization",
    "Package",
    "Page",
    "PayloadTooLarge",
    "PermissionDenied",
    "RateLimited",
    "Run",
    "RunPlan",
    "RunSummary",
    "Unauthenticated",
    "Unavailable",
    "ValidationError",
    "Workflow",
    "WorkflowDetail",
    "WorkflowValidation",
    "parse_quantity",
    "parse_value",
    "quantity",
]
