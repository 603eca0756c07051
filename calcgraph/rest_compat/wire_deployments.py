"""Answers of the deployment routes (contract 11), each its domain view as it is (`as_viewed`)."""

from __future__ import annotations

from typing import Any

from calcgraph.domain.packages.views import DeploymentHistoryEntry, DeploymentStateView
from calcgraph.rest_compat.wire import Out, as_viewed


class DeploymentHistoryOut(Out):
    __annotations__ = as_viewed(DeploymentHistoryEntry)


class DeploymentStateOut(Out):
    __annotations__ = as_viewed(
        DeploymentStateView,
        history=list[DeploymentHistoryOut],
        traffic_split=dict[str, float] | None,
        observed=dict[str, Any] | None,
        criteria=dict[str, float | None] | None,
    )
