"""Request JSON's nesting bound (contract section 2), checked without walking every string of
a wide document: `json_limits` decides depth over the containers alone, and walks the value
whole only when a string could be bad or the depth is over (to name where)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calcgraph.domain import json_limits
from calcgraph.domain.errors import ValidationError

# Good strings only: a bad one is refused whatever the depth.
leaves = st.one_of(
    st.integers(-5, 5), st.text(alphabet="ab[]{}", max_size=3), st.none(), st.booleans()
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet="ab", max_size=2), inner, max_size=3)
    ),
    max_leaves=40,
)


def nested(levels: int, leaf: Any) -> Any:
    for _ in range(levels):
        leaf = [leaf]
    return leaf


def refused(value: Any) -> bool:
    try:
        json_limits.check_value(value)
    except ValidationError:
        return True
    return False


@settings(max_examples=300, deadline=None)
@given(values, st.integers(0, 70))
def test_the_depth_decided_over_containers_is_the_whole_walks(value: Any, levels: int) -> None:
    deep = nested(levels, value)
    assert json_limits._deeper_than(deep, json_limits.MAX_DEPTH) == refused(deep)


@pytest.mark.parametrize("leaf", [1, "s", [], {}])
@pytest.mark.parametrize("levels", [63, 64, 65])
def test_a_body_at_the_bound_and_past_it(levels: int, leaf: Any) -> None:
    body = json.dumps({"wide": [{"a": 1}] * 100, "deep": nested(levels, leaf)}).encode()
    if refused(json.loads(body)):
        with pytest.raises(ValidationError, match="nested deeper than 64 levels at deep"):
            json_limits.loads(body)
    else:
        assert json_limits.loads(body)["wide"][0] == {"a": 1}


def test_a_wide_body_with_a_bad_string_is_still_refused() -> None:
    body = json.dumps({"nodes": [{"k": "x"}] * 100 + [{"k": "a\u0000b"}]}).encode()
    with pytest.raises(ValidationError, match="NUL"):
        json_limits.loads(body)
