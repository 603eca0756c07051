"""Contract 11, Breaking changes and Removal, as pure rules: the interface diff by the type
rules, MAJOR bumps under manual, removal versions reached."""

from __future__ import annotations

from typing import Any

import pytest

from calcgraph.domain.errors import Conflict, ValidationError
from calcgraph.domain.packages.deployment_plan import FunctionHistory, PackageHistory
from calcgraph.domain.packages.interface_diff import breaking, function_changes
from calcgraph.domain.packages.lifecycle_rules import is_major_bump
from calcgraph.domain.packages.semver_rules import parse_version
from calcgraph.domain.packages.versioning import plan_deployment
from tests.packages.test_versioning import A, B, history, make, stored

IN = {"length": {"type": "Length", "required": True}}
OUT = {"moment": {"type": "Moment"}}


def kinds(old: tuple[Any, Any], new: tuple[Any, Any]) -> dict[str, bool]:
    return {f"{c.kind}:{c.port}": c.breaking for c in function_changes("f", old, new)}


class TestInterfaceDiff:
    def test_same_interface_has_no_change(self) -> None:
        assert function_changes("f", (IN, OUT), (IN, OUT)) == []

    def test_removed_ports_are_breaking(self) -> None:
        assert kinds((IN, OUT), ({}, {})) == {
            "input_removed:length": True,
            "output_removed:moment": True,
        }

    def test_new_required_input_breaks_new_optional_does_not(self) -> None:
        new_in = {**IN, "a": {"type": "Float"}, "b": {"type": "Float", "required": False}}
        assert kinds((IN, OUT), (new_in, OUT)) == {"input_added:a": True, "input_added:b": False}

    def test_optional_input_made_required_breaks(self) -> None:
        optional = {"length": {"type": "Length", "required": False}}
        assert kinds((optional, OUT), (IN, OUT)) == {"input_required:length": True}
        assert kinds((IN, OUT), (optional, OUT)) == {"input_optional:length": False}

    def test_input_types_by_the_connection_rule(self) -> None:
        widened = {"length": {"type": "Float", "required": True}}
        other = {"length": {"type": "Force", "required": True}}
        # Length lies on Float's chain: a Length still connects; a Force does not.
        assert kinds((IN, OUT), (widened, OUT)) == {"input_type:length": False}
        assert kinds((IN, OUT), (other, OUT)) == {"input_type:length": True}

    def test_output_types_by_the_connection_rule(self) -> None:
        assert kinds((IN, OUT), (IN, {"moment": {"type": "Float"}})) == {
            "output_type:moment": False
        }
        changes = function_changes("f", (IN, OUT), (IN, {"moment": {"type": "Length"}}))
        assert [c.breaking for c in changes] == [True]
        assert "cannot connect" in changes[0].reason

    def test_struct_and_list_types(self) -> None:
        old = {"v": {"type": "list[Force]"}}
        assert kinds((IN, old), (IN, {"v": {"type": "list[Float]"}})) == {"output_type:v": False}
        assert kinds((IN, old), (IN, {"v": {"type": "list[Length]"}})) == {"output_type:v": True}

    def test_added_output_and_function(self) -> None:
        assert kinds((IN, OUT), (IN, {**OUT, "extra": {"type": "Float"}})) == {
            "output_added:extra": False
        }
        assert [c.breaking for c in function_changes("f", None, (IN, OUT))] == [False]
        assert [c.breaking for c in function_changes("f", (IN, OUT), None)] == [True]

    def test_typed_io_dropped_breaks(self) -> None:
        assert kinds((IN, OUT), (None, None)) == {"typed_io_removed:None": True}
        assert kinds((None, None), (IN, OUT)) == {"typed_io_added:None": False}

    def test_a_type_that_does_not_parse_is_compared_as_text(self) -> None:
        bad = {"length": {"type": "list[[[", "required": True}}
        assert breaking(function_changes("f", (IN, OUT), (bad, OUT)))


class TestMajorBump:
    @pytest.mark.parametrize(
        ("before", "after", "major"),
        [
            ("1.2.0", "2.0.0", True),
            ("1.2.0", "1.3.0", False),
            ("1.2.0", "1.2.1", False),
            ("0.2.0", "0.3.0", True),
            ("0.2.0", "0.2.5", False),
            ("0.9.0", "1.0.0", True),
            ("2.0.0", "1.9.0", False),
        ],
    )
    def test_rule(self, before: str, after: str, major: bool) -> None:
        assert is_major_bump(parse_version(before), parse_version(after)) is major


BREAKING_IO: dict[str, Any] = {
    "inputs": {"length": {"type": "Force"}},
    "outputs": {"moment": {"type": "Moment"}},
}


class TestPlan:
    def test_manual_break_without_major_is_409_listing_each(self) -> None:
        m = make("1.1.0", "manual", {"beam": {"handler": "beam:run", **BREAKING_IO}})
        past = history(stored("1.0.0", A))
        with pytest.raises(Conflict) as caught:
            plan_deployment(m, {"beam": B}, past)
        assert "input 'length' changed type Length -> Force" in caught.value.message
        listed = caught.value.extra["breaking_changes"]
        assert [(c["function"], c["change"], c["port"]) for c in listed] == [
            ("beam", "input_type", "length")
        ]

    def test_manual_break_with_major_bump_passes(self) -> None:
        m = make("2.0.0", "manual", {"beam": {"handler": "beam:run", **BREAKING_IO}})
        plan = plan_deployment(m, {"beam": B}, history(stored("1.0.0", A)))
        assert [c.kind for c in plan.breaking_changes] == ["input_type"]

    def test_manual_below_one_needs_a_minor_bump(self) -> None:
        m = make("0.2.1", "manual", {"beam": {"handler": "beam:run", **BREAKING_IO}})
        with pytest.raises(Conflict):
            plan_deployment(m, {"beam": B}, history(stored("0.2.0", A), packages=("0.2.0",)))
        m = make("0.3.0", "manual", {"beam": {"handler": "beam:run", **BREAKING_IO}})
        plan = plan_deployment(m, {"beam": B}, history(stored("0.2.0", A), packages=("0.2.0",)))
        assert plan.breaking_changes

    def test_auto_reports_breaks(self) -> None:
        m = make("1.1.0", "auto", {"beam": {"handler": "beam:run", **BREAKING_IO}})
        plan = plan_deployment(m, {"beam": B}, history(stored("1.0.0", A)))
        assert [c.as_dict()["change"] for c in plan.breaking_changes] == ["input_type"]
        (beam,) = plan.functions
        assert beam.is_breaking_change

    def test_compatible_change_is_no_break(self) -> None:
        io = {"inputs": {"length": {"type": "Float"}}, "outputs": {"moment": {"type": "Moment"}}}
        m = make("1.1.0", "manual", {"beam": {"handler": "beam:run", **io}})
        plan = plan_deployment(m, {"beam": B}, history(stored("1.0.0", A)))
        assert plan.breaking_changes == ()

    def test_removed_function_under_manual_needs_major(self) -> None:
        two = {
            "beam": {"handler": "beam:run", **BREAKING_IO},
            "gone": {"handler": "beam:gone", **BREAKING_IO},
        }
        old = make("1.0.0", "manual", two)
        past = PackageHistory(
            versions=("1.0.0",),
            functions={
                name: FunctionHistory("1.0.0", {"1.0.0": stored("1.0.0", A, old, name)})
                for name in two
            },
        )
        keep = {"beam": {"handler": "beam:run", **BREAKING_IO}}
        with pytest.raises(Conflict) as caught:
            plan_deployment(make("1.1.0", "manual", keep), {"beam": A}, past)
        assert "function 'gone' was removed" in caught.value.message
        plan = plan_deployment(make("2.0.0", "manual", keep), {"beam": A}, past)
        assert [c.kind for c in plan.breaking_changes] == ["function_removed"]


class TestRemoval:
    def spec(self, removal: str) -> dict[str, Any]:
        return {
            "beam": {
                "handler": "beam:run",
                "deprecated": True,
                "deprecated_message": "use beam2",
                "removal_version": removal,
                **{"inputs": IN, "outputs": OUT},
            }
        }

    @pytest.mark.parametrize("version", ["2.0.0", "2.0.1", "3.0.0"])
    def test_at_or_past_the_removal_version_is_422(self, version: str) -> None:
        with pytest.raises(ValidationError) as caught:
            plan_deployment(make(version, "auto", self.spec("2.0.0")), {"beam": A})
        assert "beam" in caught.value.message
        assert caught.value.errors[0].loc == ("manifest", "functions", "beam", "removal_version")

    def test_before_the_removal_version_deploys(self) -> None:
        plan = plan_deployment(make("1.9.9", "auto", self.spec("2.0.0")), {"beam": A})
        assert plan.functions[0].deprecated

    def test_a_removal_declared_earlier_still_holds(self) -> None:
        declared = make("1.0.0", "auto", self.spec("2.0.0"))
        old = stored("1.0.0", A, declared)
        old = type(old)(**{**old.__dict__, "removal_version": "2.0.0", "deprecated": True})
        quiet = {"beam": {"handler": "beam:run", "inputs": IN, "outputs": OUT}}
        with pytest.raises(ValidationError):
            plan_deployment(make("2.0.1", "auto", quiet), {"beam": A}, history(old))


class TestEveryStrategyPlans:
    """Every strategy of the manifest is honoured now, so none is refused at planning."""

    def manifest(self, **package: Any) -> Any:
        from calcgraph.domain.packages.manifest import parse_manifest

        return parse_manifest(
            {
                "kind": "package",
                "version": 1,
                "package": {"name": "demo", "version": "1.0.0", **package},
                "functions": {"beam": {"handler": "beam:run", "inputs": IN, "outputs": OUT}},
            }
        )

    def test_rolling_blue_green_and_a_disabled_canary_deploy(self) -> None:
        plan_deployment(self.manifest(deployment={"strategy": "rolling"}), {"beam": A})
        plan_deployment(self.manifest(deployment={"strategy": "blue-green"}), {"beam": A})
        disabled = {"strategy": "canary", "canary": {"enabled": False}}
        plan_deployment(self.manifest(deployment=disabled), {"beam": A})
        # An enabled canary is judged by the canary's rules (its split must name hosted
        # versions), not refused as unsupported.
        enabled = {"strategy": "canary", "canary": {"traffic_split": {"1.0.0": 10, "0.9.0": 90}}}
        with pytest.raises(ValidationError, match="does not host: 0.9.0"):
            plan_deployment(self.manifest(deployment=enabled), {"beam": A})


class TestDeprecationRule:
    def test_header_is_an_rfc9745_unix_time(self) -> None:
        from datetime import UTC, datetime

        from calcgraph.domain.functions.deprecation import Deprecation, deprecation_warning

        aware = Deprecation(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "w")
        # SQLite reads naive UTC.
        naive = Deprecation(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC).replace(tzinfo=None), "w")
        assert aware.header == naive.header == "@1767323045"
        assert deprecation_warning("f", None, None) == "f is deprecated"
        assert deprecation_warning("f", "use g", None) == "f is deprecated: use g"
        assert deprecation_warning("f", None, "2.0.0") == "f is deprecated; removed in 2.0.0"
        # The message goes into the JSON body only: the header carries nothing the author wrote.
        hostile = Deprecation(datetime(2026, 1, 1, tzinfo=UTC), "x\r\nSet-Cookie: a=b")
        assert hostile.header == "@1767225600"
