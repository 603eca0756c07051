"""Checking a graph against the function versions its references resolved to: the report,
and the contract's refusal of an invalid one. Pure (no session, no framework), so a large
graph is checked on a thread holding no pooled connection (issue 27)."""

from __future__ import annotations

from dataclasses import dataclass

from calcgraph.domain.errors import FieldError, InvalidRequest, ValidationError
from calcgraph.domain.functions.deprecation import deprecation_of
from calcgraph.domain.functions.views import FunctionVersionView
from calcgraph.domain.types.expr import TypeExprError
from calcgraph.domain.workflows.graph import Graph
from calcgraph.domain.workflows.validation import FunctionSignature, Report, validate

INVALID_GRAPH = "workflow graph is invalid"


@dataclass(frozen=True)
class Checked:
    """A graph with its report and, per function node, the function version it resolved to."""

    graph: Graph
    report: Report
    resolved: dict[str, str]


def report_errors(report: Report) -> list[FieldError]:
    """The report as the contract's located `errors` list of a 422 body."""
    return [
        FieldError(
            ("body", "graph", problem.category)
            + ((problem.node_key,) if problem.node_key is not None else ())
            + ((problem.port,) if problem.port is not None else ()),
            problem.reason,
        )
        for problem in report.problems
    ]


def refuse(report: Report, *, saving: bool) -> None:
    """Raise the contract's refusal for an invalid report (400 for untyped functions when
    saving, 422 otherwise); return when the report is clean."""
    if report.valid:
        return
    body = {"report": report.as_dict()}
    if saving and report.has_untyped_functions:
        raise InvalidRequest(
            "workflow graph references functions without typed I/O; only typed functions "
            "can be workflow nodes",
            body,
        )
    raise ValidationError(INVALID_GRAPH, report_errors(report), body)


Versions = dict[str, FunctionVersionView | None]
"""Each function reference of a graph and the version it resolves to for the caller (None:
unknown, hidden, or no version matches)."""


def checked(graph: Graph, versions: Versions) -> Checked:
    """Validate `graph` against the resolved versions: pure work, on any thread."""
    signatures: dict[str, FunctionSignature | None] = {}
    for ref, version in versions.items():
        if version is None:
            signatures[ref] = None
            continue
        try:
            deprecation = deprecation_of(ref, version)
            signatures[ref] = FunctionSignature.from_schemas(
                version.inputs_schema,
                version.outputs_schema,
                typed=version.typed,
                deprecation=deprecation.warning if deprecation is not None else None,
            )
        except TypeExprError:
            signatures[ref] = None
    report = validate(graph, signatures)
    resolved_ids = {
        node.node_key: version.id
        for node in graph.function_nodes()
        if (version := versions.get(node.function)) is not None
    }
    return Checked(graph, report, resolved_ids)
