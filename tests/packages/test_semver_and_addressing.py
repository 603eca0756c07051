"""Semver precedence and ranges (from the library), and which version a call addresses."""

from __future__ import annotations

import random

import pytest

from calcgraph.domain.errors import NotFound
from calcgraph.domain.packages.addressing import (
    FunctionRef,
    parse_function_ref,
    select_version,
    split_selector,
)
from calcgraph.domain.packages.semver_rules import (
    is_stable,
    latest_version,
    parse_range,
    sort_versions,
    version_from_tag,
)

ORDER = [
    "0.9.0",
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "1.0.1",
    "1.2.0",
    "1.10.0",
    "2.0.0",
]


class TestPrecedence:
    def test_semver_precedence_including_pre_releases(self) -> None:
        shuffled = ORDER[:]
        random.Random(4).shuffle(shuffled)
        assert sort_versions(shuffled) == ORDER

    def test_latest_prefers_stable(self) -> None:
        assert latest_version(["1.0.0", "1.1.0-rc.1"]) == "1.0.0"
        assert latest_version(["1.0.0-alpha", "1.0.0-rc.1"]) == "1.0.0-rc.1"
        assert latest_version([]) is None

    def test_stable(self) -> None:
        assert is_stable("1.0.0+build.1")
        assert not is_stable("1.0.0-rc.1")

    @pytest.mark.parametrize(
        ("tag", "version"),
        [
            ("v1.2.0", "1.2.0"),
            ("v1.3.0-rc.1", "1.3.0-rc.1"),
            ("1.2.0", None),
            ("vnext", None),
            ("v1.2", None),
        ],
    )
    def test_version_from_tag(self, tag: str, version: str | None) -> None:
        assert version_from_tag(tag) == version


class TestRanges:
    @pytest.mark.parametrize(
        ("text", "inside", "outside"),
        [
            (">=1.2.0,<2.0.0", ["1.2.0", "1.9.9"], ["1.1.9", "2.0.0"]),
            (">=1.2,<2", ["1.2.0", "1.99.0"], ["1.1.0", "2.0.0"]),
            ("^1.2", ["1.2.0", "1.9.0"], ["2.0.0", "1.1.0"]),
            ("^0.2.3", ["0.2.3", "0.2.9"], ["0.3.0"]),
            ("^0.0.3", ["0.0.3"], ["0.0.4"]),
            ("~1.2.3", ["1.2.3", "1.2.9"], ["1.3.0"]),
            ("~1", ["1.0.0", "1.9.0"], ["2.0.0"]),
            ("1.2.3", ["1.2.3"], ["1.2.4"]),
            ("!=1.2.3", ["1.2.4"], ["1.2.3"]),
            ("*", ["0.0.1", "9.9.9"], []),
            (">=1.0.0", ["1.0.0"], ["1.0.0-rc.1"]),
        ],
    )
    def test_matching(self, text: str, inside: list[str], outside: list[str]) -> None:
        parsed = parse_range(text)
        assert all(parsed.contains(v) for v in inside)
        assert not any(parsed.contains(v) for v in outside)

    @pytest.mark.parametrize("text", ["", ",", ">=1.x", "==1.2", "^x", 1.2, None, ">=1.0.0,,<2"])
    def test_invalid(self, text: object) -> None:
        with pytest.raises(ValueError, match="version range"):
            parse_range(text)


class TestSelectVersion:
    VERSIONS = ["1.0.0", "1.1.0", "1.2.0-rc.1"]

    def test_none_and_latest_pick_the_highest_stable(self) -> None:
        assert select_version(self.VERSIONS, None, subject="f") == "1.1.0"
        assert select_version(self.VERSIONS, "latest", subject="f") == "1.1.0"

    def test_current_wins_when_given(self) -> None:
        assert select_version(self.VERSIONS, None, subject="f", current="1.0.0") == "1.0.0"

    def test_exact_versions(self) -> None:
        assert select_version(self.VERSIONS, "1.2.0-rc.1", subject="f") == "1.2.0-rc.1"
        assert select_version(self.VERSIONS, "v1.0.0", subject="f") == "1.0.0"
        assert select_version(["1.0.0+b.1"], "1.0.0", subject="f") == "1.0.0+b.1"

    @pytest.mark.parametrize("selector", ["9.9.9", "1.2.0", "nonsense", "1.0"])
    def test_a_missing_version_names_what_exists(self, selector: str) -> None:
        with pytest.raises(NotFound) as caught:
            select_version(self.VERSIONS, selector, subject="function demo/beam")
        message = caught.value.message
        assert "function demo/beam has no version" in message
        assert "1.0.0, 1.1.0, 1.2.0-rc.1" in message
        assert caught.value.extra["versions"] == ["1.0.0", "1.1.0", "1.2.0-rc.1"]

    def test_nothing_deployed(self) -> None:
        with pytest.raises(NotFound, match="no versions"):
            select_version([], None, subject="package demo")


class TestReferences:
    def test_split_selector(self) -> None:
        assert split_selector("beam@1.2.0") == ("beam", "1.2.0")
        assert split_selector("beam@latest") == ("beam", "latest")
        assert split_selector("beam") == ("beam", None)

    def test_parse_function_ref(self) -> None:
        assert parse_function_ref("demo-beam/stress_check@1.2.0") == FunctionRef(
            "demo-beam", "stress_check", "1.2.0"
        )
        assert parse_function_ref("demo-beam/cantilever") == FunctionRef("demo-beam", "cantilever")
        for bad in ["cantilever", "a/b/c", "/b", "a/", "a/b@"]:
            assert parse_function_ref(bad) is None
