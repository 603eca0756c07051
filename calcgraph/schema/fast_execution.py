"""Completing long lists of plain objects without graphql-core's per-field machinery.

A run of 1,000 nodes asks for about 8,500 fields; graphql-core completes each through
`execute_field` (resolve info, resolver wrapper, awaitable checks, path objects), which costs
more than everything else of the query together. Most of those fields are plain attributes of
the objects our resolvers already built (Strawberry "basic" fields: no resolver, no
extension, no argument), and their values need only the scalar's output coercion.

`FastExecutionContext` compiles, once per request and selection, a plan for a list of objects
whose selected fields are all such plain fields (leaves, or nested objects made only of
plain fields), and completes the list with it in a plain loop. The plan answers exactly what
the standard path would: the same fields (collected by graphql-core itself, so fragments and
`@skip`/`@include` count), in the same order, through the same coercion. Anything the plan does
not cover (a resolver, arguments, `@defer`, abstract or list types, middleware) leaves the list
to graphql-core; a value that would make an error there (null in a non-null field, a value the
scalar refuses, an awaitable) makes the plan give up and graphql-core complete the whole list,
so errors are reported exactly as before. Reading plain attributes has no side effect, so
completing the list again is safe.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from graphql import (
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLResolveInfo,
    Undefined,
    is_leaf_type,
)
from graphql.type.scalars import serialize_boolean, serialize_id, serialize_string
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.types.field import StrawberryField

if TYPE_CHECKING:
    from graphql.execution.collect_fields import FieldDetailsList
    from graphql.pyutils import AwaitableOrValue, Path

Complete = Callable[[Any], Any]

# A field's step: how to read it (the field's default resolver, its attribute), the class of
# a raw value that is already its output value, and how to complete any other raw value.
_Step = tuple[str, Callable[[Any, str], Any], str, type | None, Complete]

# Output coercions that return a value of this class unchanged (graphql-core's own).
_PASSED: dict[Any, type] = {serialize_string: str, serialize_id: str, serialize_boolean: bool}


class _GiveUp(Exception):
    """The value needs graphql-core's own completion (an error to report, an awaitable)."""


class FastExecutionContext(StrawberryGraphQLCoreExecutionContext):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # None: the selection is not plain, graphql-core completes it.
        self._plans: dict[tuple[int, int], tuple[FieldDetailsList, Complete | None]] = {}

    def complete_list_value(
        self,
        return_type: GraphQLList[GraphQLOutputType],
        field_details_list: FieldDetailsList,
        info: GraphQLResolveInfo[Any],
        path: Path,
        result: Any,
        position_context: Any,
    ) -> AwaitableOrValue[list[Any]]:
        # Only lists and tuples (an iterator read by a plan that gives up would be spent) of
        # more than one item (compiling a plan for one costs more than it saves).
        if isinstance(result, list | tuple) and len(result) > 1:
            complete = self._plan(return_type.of_type, field_details_list)
            if complete is not None:
                try:
                    return [complete(item) for item in result]
                except Exception:  # _GiveUp, or a scalar refusing a value: graphql-core's turn
                    pass
        return super().complete_list_value(
            return_type, field_details_list, info, path, result, position_context
        )

    def _plan(self, item_type: GraphQLOutputType, details: FieldDetailsList) -> Complete | None:
        # Keyed like graphql-core's own subfield memo: by the identity of the field group,
        # kept alive with the plan so that the id cannot be reused during the request.
        key = (id(item_type), id(details))
        cached = self._plans.get(key)
        if cached is None:
            try:
                plan = self._compile(item_type, details)
            except Exception:  # an unexpected shape of a future graphql-core or Strawberry
                plan = None
            cached = (details, plan)
            self._plans[key] = cached
        return cached[1]

    def _compile(self, item_type: GraphQLOutputType, details: FieldDetailsList) -> Complete | None:
        manager = self.middleware_manager
        if manager is not None and manager.middlewares:  # extensions that wrap every resolver
            return None
        non_null = isinstance(item_type, GraphQLNonNull)
        inner = item_type.of_type if isinstance(item_type, GraphQLNonNull) else item_type
        if not isinstance(inner, GraphQLObjectType):
            return None
        complete_object = self._compile_object(inner, details)
        if complete_object is None:
            return None
        return _nullable(complete_object, non_null)

    def _compile_object(self, object_type: GraphQLObjectType, details: FieldDetailsList) -> Any:
        if object_type.is_type_of is not None:
            return None
        grouped, new_defer_usages, forbidden = self.collect_subfields(object_type, details)
        if new_defer_usages or forbidden:
            return None
        steps: list[_Step] = []
        for response_name, field_group in grouped.items():
            step = self._compile_field(object_type, field_group)
            if step is None:
                return None
            steps.append((response_name, *step))

        def complete_object(source: Any) -> dict[str, Any]:
            # One loop over the fields, and no call at all for a value already in its output
            # form (a str of a String field): 10,000 nodes of 6 fields are 60,000 of these.
            completed = {}
            for name, read, attribute, plain, finish in steps:
                raw = read(source, attribute)
                completed[name] = raw if raw.__class__ is plain else finish(raw)
            return completed

        return complete_object

    def _compile_field(self, parent: GraphQLObjectType, group: FieldDetailsList) -> Any:
        if any(d.defer_usage is not None or d.node.arguments for d in group):
            return None
        name = group[0].node.name.value
        if name == "__typename":
            type_name = parent.name
            return (lambda _source, _attribute: type_name), name, str, _never
        field_def = parent.fields.get(name)
        if field_def is None or field_def.args:
            return None
        definition = (field_def.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF)
        if not isinstance(definition, StrawberryField) or not definition.is_basic_field:
            return None
        if not getattr(field_def.resolve, "_is_default", False) or definition.is_async:
            return None
        read = definition.default_resolver
        attribute = definition.python_name
        field_type = field_def.type
        non_null = isinstance(field_type, GraphQLNonNull)
        inner = field_type.of_type if isinstance(field_type, GraphQLNonNull) else field_type
        if is_leaf_type(inner):
            coerce = inner.coerce_output_value
            return read, attribute, _PASSED.get(coerce), _leaf(coerce, non_null)
        if isinstance(inner, GraphQLObjectType):
            complete_object = self._compile_object(inner, group)
            if complete_object is None:
                return None
            return read, attribute, None, _nullable(complete_object, non_null)
        return None


# Values that are neither an error nor an awaitable, checked by class in one lookup.
_PLAIN = frozenset({str, int, float, bool, dict, list, datetime, date})


def _checked(raw: Any) -> Any:
    if raw.__class__ not in _PLAIN and (isinstance(raw, Exception) or hasattr(raw, "__await__")):
        raise _GiveUp
    return raw


def _leaf(coerce: Complete, non_null: bool) -> Complete:
    def coerced(raw: Any) -> Any:
        value = coerce(raw)
        if value is None or value is Undefined:
            raise _GiveUp
        return value

    return _nullable(coerced, non_null)


def _never(raw: Any) -> Any:
    raise _GiveUp


def _nullable(complete: Complete, non_null: bool) -> Complete:
    def value(raw: Any) -> Any:
        if raw is None or raw is Undefined:
            if non_null:
                raise _GiveUp
            return None
        return complete(_checked(raw))

    return value
