"""Bounds on a query document checked before any other rule and before execution.

Fragments that spread the previous one twice expand to 2^n selections while the text stays
within the token, depth and alias limits; strawberry's depth and alias rules expand fragments
again for every spread, so such a document would keep the event loop busy in validation alone.
Here each fragment's size is computed once (memoised), so the check is linear in the text, and
a document over a bound is answered before the expensive rules run.

Checked here, all in one walk:
- spreads of fragments the document does not define (named in the answer);
- the number of field selections once every fragment is expanded;
- a cost estimate: each field costs 1, a list-typed field multiplies what it selects by
  LIST_ESTIMATE (a listing's `limit` literal when given), so nested lists add up fast;
- an estimate of the answer's size (contract 8b): each leaf its typical bytes, a JSON value
  the most a listing shows of one (64 KiB), the whole-run values (a plan, a graph) their
  `_WHOLE_VALUE_BYTES`, times the rows its listings hold (a page's `limit`, else
  LIST_ESTIMATE); over the answer bound (16 MiB) the document is refused before execution;
- inline values: nested at most 64 levels, strings without NUL or lone surrogates.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    ListValueNode,
    Node,
    ObjectValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    StringValueNode,
    Visitor,
    get_named_type,
    visit,
)
from graphql.type import GraphQLOutputType
from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from calcgraph.domain.answers import ANSWER_MAX_BYTES, LISTED_VALUE_MAX_BYTES
from calcgraph.domain.json_limits import MAX_DEPTH, bad_text

LIST_ESTIMATE = 20
"""The elements a list field is assumed to hold when the query does not say (`limit`)."""
_LEAF_BYTES = 64
"""A leaf that is not a JSON value: an id, a name, a time, a status."""
_WHOLE_VALUE_BYTES = {
    "planSnapshot": 2 * 1024 * 1024,
    "planGraph": 512 * 1024,
    "graph": 2 * 1024 * 1024,
    "resolvedFunctions": 256 * 1024,
    "inputNodes": 256 * 1024,
}
"""JSON values read whole, never left out: a plan or a graph of a large workflow (12,000 nodes
wrote 1.9 MB of graph)."""
_SMALL_VALUE_BYTES = {"resources": 256}
"""JSON values whose size their validation bounds: a function version's `resources` is three
numbers (contract 11), not a 64 KiB value in each version of each function."""
_SIZED_TEXT = {"logs"}
"""Text fields that hold up to 64 KiB (captured output)."""


_ESTIMATES: WeakKeyDictionary[DocumentNode, int] = WeakKeyDictionary()
"""The estimated answer bytes of each checked document (the document cache keeps the checked
document object, so a remembered text keeps its estimate)."""


def estimated_bytes(document: DocumentNode | None) -> int:
    """The largest estimated answer of the document's operations (0: not checked)."""
    return _ESTIMATES.get(document, 0) if document is not None else 0


@dataclass
class _Size:
    selections: int
    cost: int
    bytes: int = 0


@dataclass
class _Walk:
    schema: GraphQLSchema
    fragments: dict[str, FragmentDefinitionNode]
    unknown: list[FragmentSpreadNode] = field(default_factory=list)
    memo: dict[str, _Size] = field(default_factory=dict)
    in_progress: set[str] = field(default_factory=set)

    def fragment(self, spread: FragmentSpreadNode) -> _Size:
        name = spread.name.value
        known = self.memo.get(name)
        if known is not None:
            return known
        definition = self.fragments.get(name)
        if definition is None:
            self.unknown.append(spread)
            return _Size(0, 0)
        if name in self.in_progress:  # a cycle: its own rule reports it
            return _Size(0, 0)
        self.in_progress.add(name)
        parent = self.schema.get_type(definition.type_condition.name.value)
        size = self.selection_set(definition.selection_set, parent)
        self.in_progress.discard(name)
        self.memo[name] = size
        return size

    def selection_set(
        self, selections: SelectionSetNode | None, parent: object, *, page: bool = False
    ) -> _Size:
        total = _Size(0, 0)
        for selection in selections.selections if selections is not None else ():
            if isinstance(selection, FieldNode):
                part = self.field(selection, parent, page=page)
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                inner = self.schema.get_type(condition.name.value) if condition else parent
                part = self.selection_set(selection.selection_set, inner, page=page)
            elif isinstance(selection, FragmentSpreadNode):
                part = self.fragment(selection)
            else:  # pragma: no cover - the grammar has no other selection
                continue
            total.selections += part.selections
            total.cost += part.cost
            total.bytes += part.bytes
        return total

    def field(self, node: FieldNode, parent: object, *, page: bool = False) -> _Size:
        """`page`: the field is in a listing page whose `limit` already counted its rows."""
        definition = (
            parent.fields.get(node.name.value)
            if isinstance(parent, GraphQLObjectType | GraphQLInterfaceType)
            else None
        )
        if definition is None or node.selection_set is None:
            return _Size(1, 1, _leaf_bytes(node, definition))
        # A page (a field taking `limit` that is no list): its rows are its limit, or
        # LIST_ESTIMATE; its `items` list counts them once, not again.
        paged = "limit" in definition.args and not _is_list(definition.type)
        inner = self.selection_set(node.selection_set, get_named_type(definition.type), page=paged)
        factor = _factor(node, definition.type)
        rows = factor
        if paged and factor == 1:
            rows = LIST_ESTIMATE
        elif page and _is_list(definition.type):
            rows = 1
        return _Size(
            1 + inner.selections,
            1 + factor * inner.cost,
            _LEAF_BYTES + rows * inner.bytes,
        )


def _is_list(output: GraphQLOutputType) -> bool:
    while isinstance(output, GraphQLNonNull):
        output = output.of_type
    return isinstance(output, GraphQLList)


def _leaf_bytes(node: FieldNode, definition: object) -> int:
    name = node.name.value
    if name in _WHOLE_VALUE_BYTES:
        return _WHOLE_VALUE_BYTES[name]
    if name in _SMALL_VALUE_BYTES:
        return _SMALL_VALUE_BYTES[name]
    if name in _SIZED_TEXT:
        return LISTED_VALUE_MAX_BYTES
    output = getattr(definition, "type", None)
    named = get_named_type(output) if output is not None else None
    if named is not None and named.name == "JSON":
        return LISTED_VALUE_MAX_BYTES
    return _LEAF_BYTES


def _factor(node: FieldNode, output: GraphQLOutputType) -> int:
    for argument in node.arguments or ():
        if argument.name.value in _ROW_ARGUMENTS and isinstance(argument.value, IntValueNode):
            return max(1, int(argument.value.value))
    return LIST_ESTIMATE if _is_list(output) else 1


_ROW_ARGUMENTS = ("limit", "first")
"""A listing's literal row count: `limit` of a page, `first` of a run's node states."""


class _ValueCheck(Visitor):
    """Inline values: nesting depth and text that storage refuses (iterative: `visit` keeps
    its own stack, so a deep literal cannot exhaust Python's)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.errors: list[GraphQLError] = []

    def enter_list_value(self, node: ListValueNode, *_: object) -> None:
        self._deeper(node)

    def leave_list_value(self, node: ListValueNode, *_: object) -> None:
        self.depth -= 1

    def enter_object_value(self, node: ObjectValueNode, *_: object) -> None:
        self._deeper(node)

    def leave_object_value(self, node: ObjectValueNode, *_: object) -> None:
        self.depth -= 1

    def _deeper(self, node: Node) -> None:
        self.depth += 1
        if self.depth == MAX_DEPTH + 1:
            self.errors.append(
                GraphQLError(f"an inline value is nested deeper than {MAX_DEPTH} levels", node)
            )

    def enter_string_value(self, node: StringValueNode, *_: object) -> None:
        problem = bad_text(node.value)
        if problem is not None:
            self.errors.append(GraphQLError(problem, node))


def check_document(
    schema: GraphQLSchema,
    document: DocumentNode,
    *,
    max_selections: int,
    max_cost: int,
    max_bytes: int = ANSWER_MAX_BYTES,
) -> list[GraphQLError]:
    """The document's violations of the bounds above; empty when it may be validated."""
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    walk = _Walk(schema, fragments)
    errors: list[GraphQLError] = []
    largest = 0
    for definition in document.definitions:
        if isinstance(definition, FragmentDefinitionNode):
            walk.fragment(FragmentSpreadNode(name=definition.name))
            continue
        if not isinstance(definition, OperationDefinitionNode):
            continue
        root = schema.get_root_type(definition.operation)
        size = walk.selection_set(definition.selection_set, root)
        largest = max(largest, size.bytes)
        label = f"operation {definition.name.value!r}" if definition.name else "the operation"
        if size.selections > max_selections:
            errors.append(
                GraphQLError(
                    f"{label} selects {size.selections} fields once its fragments are "
                    f"expanded; the limit is {max_selections}",
                    definition,
                )
            )
        elif size.cost > max_cost:
            errors.append(
                GraphQLError(
                    f"{label} has an estimated cost of {size.cost} (each field 1, each list "
                    f"field times its limit or {LIST_ESTIMATE}); the limit is {max_cost}",
                    definition,
                )
            )
        elif size.bytes > max_bytes:
            errors.append(
                GraphQLError(
                    f"{label} could answer about {size.bytes // (1024 * 1024)} MiB (JSON "
                    f"values such as planSnapshot, graph and outputs, times the rows of their "
                    f"listings); an answer is at most {max_bytes // (1024 * 1024)} MiB: ask "
                    "for fewer rows (limit) or fewer values, or read them one at a time",
                    definition,
                )
            )
    for name, spread in {s.name.value: s for s in walk.unknown}.items():
        errors.append(
            GraphQLError(
                f"unknown fragment {name!r}: the document spreads ...{name} but defines no "
                f"fragment {name}",
                spread,
            )
        )
    _ESTIMATES[document] = largest
    values = _ValueCheck()
    visit(document, values)
    return errors + values.errors


class DocumentBounds(SchemaExtension):
    """Runs `check_document` in the validation step, ahead of the validation rules: a
    document it refuses is answered with its errors and never reaches them."""

    def __init__(self, *, max_selections: int, max_cost: int) -> None:
        super().__init__()
        self.max_selections = max_selections
        self.max_cost = max_cost

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        # Already validated (a cached document) or already refused: nothing to add.
        if document is not None and context.pre_execution_errors is None:
            errors = check_document(
                context.schema._schema,
                document,
                max_selections=self.max_selections,
                max_cost=self.max_cost,
            )
            if errors:
                context.pre_execution_errors = errors
        yield

    def on_execute(self) -> Iterator[None]:
        # The door writes a large answer off the event loop (contract 8b): it reads this. A
        # subscription's pushes are parts of one stream, each written as it comes.
        context = self.execution_context
        request = getattr(context.context, "request", None)
        if request is not None and context.operation_type is not OperationType.SUBSCRIPTION:
            request.state.answer_estimate = estimated_bytes(context.graphql_document)
        yield
