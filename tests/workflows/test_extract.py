"""Extract semantics: the bundle's keys and order, pick and filter, the deploy-time shape."""

from __future__ import annotations

from fnmatch import fnmatchcase
from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from calcgraph.domain.types.expr import parse_type_expr
from calcgraph.domain.workflows.extract import (
    Shape,
    bundle_items,
    filter_bundle,
    may_match_below,
    pick,
    pick_shape,
)

OUTPUTS = {
    "moment": 12.5,
    "deflection": 0.01,
    "reactions": {"left": 1.0, "right": 2.0},
    "forces": [1, 2, 3],
}


def test_bundle_keys_are_every_path_in_sorted_order() -> None:
    assert [key for key, _ in bundle_items(OUTPUTS)] == [
        "deflection",
        "forces",
        "moment",
        "reactions",
        "reactions/left",
        "reactions/right",
    ]


def test_pick_takes_the_first_match_in_key_order() -> None:
    assert pick(OUTPUTS, "mom*") == (True, 12.5)
    assert pick(OUTPUTS, "reactions/*") == (True, 1.0)
    assert pick(OUTPUTS, "reactions") == (True, {"left": 1.0, "right": 2.0})
    assert pick(OUTPUTS, "torque") == (False, None)


def test_pick_does_not_depend_on_insertion_order() -> None:
    reordered = dict(reversed(list(OUTPUTS.items())))
    assert pick(reordered, "*") == pick(OUTPUTS, "*") == (True, 0.01)


def test_filter_gives_every_match_possibly_none() -> None:
    assert filter_bundle(OUTPUTS, "reactions/*") == {"reactions/left": 1.0, "reactions/right": 2.0}
    assert filter_bundle(OUTPUTS, "nothing*") == {}


def test_patterns_are_case_sensitive_and_star_crosses_slashes() -> None:
    assert pick(OUTPUTS, "MOMENT") == (False, None)
    assert filter_bundle(OUTPUTS, "*ght") == {"reactions/right": 2.0}


def test_shape_descends_structs_and_marks_dicts_dynamic() -> None:
    shape = Shape.of(
        {
            "torsor": [parse_type_expr("Torsor")],
            "loads": [parse_type_expr("dict[str, {fx: Force}]")],
        }
    )
    assert set(shape.keys) == {"torsor", "torsor/force", "torsor/moment", "loads"}
    assert {str(t) for t in shape.dynamic["loads/"]} == {"{fx: Force}", "Force"}
    picked = pick_shape(shape, "torsor/m*")
    assert picked is not None
    assert [str(t) for t in picked.ports["value"]] == ["Moment3"]


GLOB = st.text(alphabet="ab/*?[]!", max_size=4)
PREFIX = st.text(alphabet="ab/", max_size=4)
SUFFIX_ALPHABET = "ab/c[]!"


@settings(max_examples=150, deadline=None)
@given(GLOB, PREFIX)
def test_may_match_below_agrees_with_brute_force(pattern: str, prefix: str) -> None:
    # A set such as `[?]` may need a character outside the base alphabet: offer the pattern's own.
    alphabet = "".join(sorted(set(SUFFIX_ALPHABET) | set(pattern)))
    reachable = any(
        fnmatchcase(prefix + "".join(suffix), pattern)
        for size in range(len(pattern) + 1)
        for suffix in product(alphabet, repeat=size)
    )
    assert may_match_below(pattern, prefix) == reachable
