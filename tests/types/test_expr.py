"""The type-expression parser: grammar, precise errors, and that it never crashes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calcgraph.domain.types.catalog import CATALOG
from calcgraph.domain.types.expr import (
    DictOf,
    ListOf,
    Named,
    Struct,
    TypeExprError,
    from_json,
    parse_type_expr,
)
from tests.types.test_compat import type_exprs


class TestGrammar:
    def test_every_catalog_name_parses(self) -> None:
        for name in CATALOG:
            assert parse_type_expr(name) == Named(name)

    def test_nesting_and_whitespace(self) -> None:
        parsed = parse_type_expr("  list[ dict[ str ,{ f : Force , m:list[Moment]} ] ] ")
        assert parsed == ListOf(
            DictOf(Struct((("f", Named("Force")), ("m", ListOf(Named("Moment"))))))
        )

    def test_json_struct_form(self) -> None:
        assert from_json({"force": "Force3", "tags": "list[String]"}) == Struct(
            (("force", Named("Force3")), ("tags", ListOf(Named("String"))))
        )

    @given(type_exprs())
    def test_printed_form_parses_back(self, expr: object) -> None:
        assert parse_type_expr(str(expr)) == expr


class TestErrors:
    @pytest.mark.parametrize(
        ("text", "fragment"),
        [
            ("Forc", "unknown type name 'Forc' at position 0; did you mean 'Force'?"),
            ("force", "did you mean 'Force'"),
            ("list[Force", "expected ']' at position 10"),
            ("list[]", "expected a type name at position 5"),
            ("dict[int, Force]", "dict keys must be str"),
            ("dict[str Force]", "expected ','"),
            ("{a: Force, a: Length}", "duplicate struct field 'a'"),
            ("{}", "at least one field"),
            ("{a Force}", "expected ':'"),
            ("Force Length", "expected end of expression at position 6"),
            ("", "empty"),
            ("   ", "empty"),
            ("list[Force]]", "position 11"),
            ("1Force", "expected a type name at position 0"),
        ],
    )
    def test_message_says_what_and_where(self, text: str, fragment: str) -> None:
        with pytest.raises(TypeExprError) as info:
            parse_type_expr(text)
        assert fragment in info.value.message

    def test_deep_nesting_is_refused_not_a_recursion_error(self) -> None:
        with pytest.raises(TypeExprError, match="deeper"):
            parse_type_expr("list[" * 500 + "Force" + "]" * 500)

    def test_json_form_rejects_non_identifiers_and_numbers(self) -> None:
        with pytest.raises(TypeExprError, match="not an identifier"):
            from_json({"not ok": "Force"})
        with pytest.raises(TypeExprError, match="not int"):
            from_json(12)
        with pytest.raises(TypeExprError, match="field 'a'"):
            from_json({"a": "Forc"})

    @given(st.text(max_size=200))
    def test_random_text_raises_only_the_parsers_error(self, text: str) -> None:
        try:
            parse_type_expr(text)
        except TypeExprError:
            pass

    @given(st.text(alphabet="list[dict]{str}:, ForceLength_xyz", max_size=80))
    def test_near_miss_text_raises_only_the_parsers_error(self, text: str) -> None:
        try:
            parse_type_expr(text)
        except TypeExprError:
            pass

    @given(
        st.recursive(
            st.none() | st.integers() | st.text(),
            lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        )
    )
    def test_random_json_raises_only_the_parsers_error(self, value: object) -> None:
        try:
            from_json(value)
        except TypeExprError:
            pass
