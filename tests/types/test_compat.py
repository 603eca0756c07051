"""The connection rule: every row of the specification's table, then structural properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calcgraph.domain.types.catalog import CATALOG, ancestors
from calcgraph.domain.types.compat import check
from calcgraph.domain.types.expr import DictOf, ListOf, Named, Struct, TypeExpr, parse_type_expr


def verdict(source: str, target: str) -> str:
    return check(parse_type_expr(source), parse_type_expr(target)).verdict


class TestSpecificationTable:
    @pytest.mark.parametrize(
        ("source", "target"),
        [
            ("Force", "Float"),
            ("Float", "Force"),
            ("Force", "Numeric"),
            ("Integer", "Float"),
            ("Torsor", "Torsor"),
            ("list[Force]", "list[Float]"),
            ("dict[str, Force]", "dict[str, Numeric]"),
            ("{a: Force, b: Length}", "{a: Float, b: Length}"),
        ],
    )
    def test_allowed(self, source: str, target: str) -> None:
        assert verdict(source, target) == "ALLOWED"

    @pytest.mark.parametrize(
        ("source", "target"),
        [
            ("Force", "Length"),
            ("Length", "Pressure"),
            ("String", "Integer"),
            ("list[Force]", "list[Length]"),
            ("dict[str, String]", "dict[str, Integer]"),
            ("{a: Force, extra: Length}", "{a: Force}"),
            ("{a: Force}", "{a: Length}"),
        ],
    )
    def test_refused(self, source: str, target: str) -> None:
        assert verdict(source, target) == "REFUSED"

    def test_reason_names_the_chain(self) -> None:
        result = check(Named("Force"), Named("Numeric"))
        assert "Force -> Float -> Numeric" in result.reason

    def test_reason_names_siblings(self) -> None:
        result = check(Named("Force"), Named("Length"))
        assert "Force" in result.reason
        assert "Length" in result.reason
        assert "Float" in result.reason

    def test_reason_names_different_roots(self) -> None:
        result = check(Named("String"), Named("Integer"))
        assert "different roots" in result.reason

    def test_reason_names_the_extra_field(self) -> None:
        result = check(parse_type_expr("{a: Force, b: Length}"), parse_type_expr("{a: Force}"))
        assert "'b'" in result.reason

    def test_reason_names_the_refused_field(self) -> None:
        result = check(parse_type_expr("{a: Force}"), parse_type_expr("{a: Length}"))
        assert result.reason.startswith("field 'a'")


class TestWideningAndComposites:
    def test_float_does_not_narrow_to_integer(self) -> None:
        assert verdict("Float", "Integer") == "REFUSED"

    def test_integer_widens_to_physical_scalars(self) -> None:
        assert verdict("Integer", "Force") == "ALLOWED"

    def test_fallback_types_feed_every_numeric_port(self) -> None:
        for name in CATALOG:
            if "Float" in ancestors(name):
                assert verdict("Float", name) == "ALLOWED", name
                assert verdict("Numeric", name) == "ALLOWED", name

    def test_force3_refines_vector3(self) -> None:
        assert verdict("Force3", "Vector3") == "ALLOWED"
        assert verdict("Force3", "Moment3") == "REFUSED"

    def test_torsor_compares_with_an_inline_struct_by_its_fields(self) -> None:
        assert verdict("Torsor", "{force: Force3, moment: Vector3}") == "ALLOWED"
        assert verdict("Torsor", "{force: Force3}") == "REFUSED"

    def test_list_and_scalar_never_connect(self) -> None:
        assert verdict("list[Force]", "Force") == "REFUSED"
        assert verdict("Force", "list[Force]") == "REFUSED"
        assert verdict("dict[str, Force]", "list[Force]") == "REFUSED"


names = st.sampled_from(sorted(CATALOG))
field_names = st.sampled_from(["a", "b", "c", "force", "moment", "span"])


def type_exprs() -> st.SearchStrategy[TypeExpr]:
    return st.recursive(
        names.map(Named),
        lambda inner: st.one_of(
            inner.map(ListOf),
            inner.map(DictOf),
            st.dictionaries(field_names, inner, min_size=1, max_size=3).map(
                lambda d: Struct(tuple(d.items()))
            ),
        ),
        max_leaves=8,
    )


class TestStructuralProperties:
    @given(type_exprs())
    def test_reflexive(self, t: TypeExpr) -> None:
        assert check(t, t).allowed

    @given(type_exprs(), type_exprs())
    def test_lists_compare_element_wise(self, a: TypeExpr, b: TypeExpr) -> None:
        assert check(ListOf(a), ListOf(b)).allowed == check(a, b).allowed

    @given(type_exprs(), type_exprs())
    def test_dicts_compare_value_wise(self, a: TypeExpr, b: TypeExpr) -> None:
        assert check(DictOf(a), DictOf(b)).allowed == check(a, b).allowed

    @given(st.dictionaries(field_names, st.tuples(type_exprs(), type_exprs()), min_size=1))
    def test_structs_compare_field_wise(self, pairs: dict[str, tuple[TypeExpr, TypeExpr]]) -> None:
        source = Struct(tuple((k, v[0]) for k, v in pairs.items()))
        target = Struct(tuple((k, v[1]) for k, v in pairs.items()))
        expected = all(check(s, t).allowed for s, t in pairs.values())
        assert check(source, target).allowed == expected

    @given(st.dictionaries(field_names, type_exprs(), min_size=1), type_exprs())
    def test_an_extra_source_field_is_refused(
        self, fields: dict[str, TypeExpr], extra: TypeExpr
    ) -> None:
        target = Struct(tuple(fields.items()))
        source = Struct((*target.fields, ("zz_extra", extra)))
        result = check(source, target)
        assert not result.allowed
        assert "zz_extra" in result.reason

    @given(names, names)
    def test_named_rule_is_the_chain_rule(self, a: str, b: str) -> None:
        on_chain = a in ancestors(b) or b in ancestors(a)
        widening = a == "Integer" and "Float" in ancestors(b)
        assert check(Named(a), Named(b)).allowed == (on_chain or widening)

    @given(type_exprs(), type_exprs())
    def test_symmetric_apart_from_integer_widening(self, a: TypeExpr, b: TypeExpr) -> None:
        if "Integer" in str(a) or "Integer" in str(b):
            return
        assert check(a, b).allowed == check(b, a).allowed
