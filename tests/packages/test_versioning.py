"""The deployment decision: auto and manual rules, latest and stable, breaking changes."""

from __future__ import annotations

from typing import Any

import pytest

from calcgraph.domain.errors import Conflict
from calcgraph.domain.packages.deployment_plan import (
    ExistingFunctionVersion,
    FunctionHistory,
    PackageHistory,
)
from calcgraph.domain.packages.manifest import Manifest, parse_manifest
from calcgraph.domain.packages.versioning import plan_deployment

A, B, C = "a" * 64, "b" * 64, "c" * 64
IO: dict[str, Any] = {
    "inputs": {"length": {"type": "Length"}},
    "outputs": {"moment": {"type": "Moment"}},
}


def make(
    version: str = "1.1.0",
    strategy: str = "auto",
    functions: dict[str, dict[str, Any]] | None = None,
    changelog: dict[str, Any] | None = None,
) -> Manifest:
    package: dict[str, Any] = {"name": "demo", "version": version, "versioning_strategy": strategy}
    if changelog is not None:
        package["changelog"] = changelog
    return parse_manifest(
        {
            "kind": "package",
            "version": 1,
            "package": package,
            "functions": functions or {"beam": {"handler": "beam:run", **IO}},
        }
    )


def stored(
    version: str, checksum: str, manifest: Manifest | None = None, name: str = "beam"
) -> ExistingFunctionVersion:
    spec = (manifest or make()).functions[name]
    return ExistingFunctionVersion(
        version=version,
        checksum=checksum,
        handler=spec.handler,
        inputs_schema=spec.inputs_schema(),
        outputs_schema=spec.outputs_schema(),
        changelog=f"log {version}",
    )


def history(
    *versions: ExistingFunctionVersion, packages: tuple[str, ...] = ("1.0.0",)
) -> PackageHistory:
    return PackageHistory(
        versions=packages,
        functions={"beam": FunctionHistory(versions[-1].version, {v.version: v for v in versions})},
    )


class TestAuto:
    def test_first_deployment_functions_are_new_with_the_package_version(self) -> None:
        plan = plan_deployment(make("1.0.0"), {"beam": A})
        (beam,) = plan.functions
        assert (beam.version, beam.status, beam.checksum) == ("1.0.0", "new", A)
        assert plan.is_latest
        assert plan.is_stable
        assert plan.report() == {
            "package_version": "1.0.0",
            "functions": [
                {
                    "name": "beam",
                    "version": "1.0.0",
                    "checksum": A,
                    "status": "new",
                    "changelog": None,
                }
            ],
        }

    def test_same_checksum_keeps_the_version(self) -> None:
        plan = plan_deployment(make(), {"beam": A}, history(stored("1.0.0", A)))
        (beam,) = plan.functions
        assert (beam.version, beam.status) == ("1.0.0", "unchanged")
        assert beam.changelog == "log 1.0.0"
        assert not beam.is_breaking_change

    def test_different_checksum_bumps_patch(self) -> None:
        plan = plan_deployment(make(), {"beam": B}, history(stored("1.0.0", A)))
        (beam,) = plan.functions
        assert (beam.version, beam.status, beam.previous_version) == ("1.0.1", "updated", "1.0.0")

    def test_patch_bump_starts_from_the_highest_existing_version(self) -> None:
        past = history(stored("1.0.3", C), stored("1.0.1", A))
        (beam,) = plan_deployment(make(), {"beam": B}, past).functions
        assert beam.version == "1.0.4"

    def test_a_function_new_to_the_package_takes_the_package_version(self) -> None:
        functions: dict[str, dict[str, Any]] = {
            "beam": {"handler": "beam:run", **IO},
            "stress": {"handler": "stress:check"},
        }
        plan = plan_deployment(
            make("1.3.0", functions=functions),
            {"beam": A, "stress": C},
            history(stored("1.0.0", A)),
        )
        statuses = {f.name: (f.version, f.status) for f in plan.functions}
        assert statuses == {"beam": ("1.0.0", "unchanged"), "stress": ("1.3.0", "new")}
        assert not next(f for f in plan.functions if f.name == "stress").typed

    def test_an_immutable_record_change_with_the_same_code_bumps_patch(self) -> None:
        changed = make(functions={"beam": {"handler": "beam:run", "deprecated": True, **IO}})
        plan = plan_deployment(changed, {"beam": A}, history(stored("1.0.0", A)))
        (beam,) = plan.functions
        assert (beam.version, beam.status, beam.deprecated) == ("1.0.1", "updated", True)
        assert any("deprecated" in w for w in plan.warnings)

    def test_a_version_written_for_an_auto_function_is_reported(self) -> None:
        m = make(functions={"beam": {"handler": "beam:run", "version": "5.0.0", **IO}})
        plan = plan_deployment(m, {"beam": B}, history(stored("1.0.0", A)))
        assert plan.functions[0].version == "1.0.1"
        assert any("5.0.0" in w for w in plan.warnings)

    def test_removed_functions_are_listed(self) -> None:
        past = PackageHistory(
            ("1.0.0",),
            {
                "beam": FunctionHistory("1.0.0", {"1.0.0": stored("1.0.0", A)}),
                "gone": FunctionHistory("1.0.0", {"1.0.0": stored("1.0.0", C)}),
            },
        )
        assert plan_deployment(make(), {"beam": A}, past).removed_functions == ("gone",)


class TestManual:
    def test_the_authors_version_is_used(self) -> None:
        m = make("2.0.0", "manual", {"beam": {"handler": "beam:run", "version": "1.4.0", **IO}})
        (beam,) = plan_deployment(m, {"beam": B}, history(stored("1.0.0", A))).functions
        assert (beam.version, beam.status) == ("1.4.0", "updated")

    def test_without_a_function_version_the_package_version_is_used(self) -> None:
        (beam,) = plan_deployment(make("2.0.0", "manual"), {"beam": A}).functions
        assert beam.version == "2.0.0"

    def test_unchanged_version_with_changed_checksum_is_refused_asking_for_a_bump(self) -> None:
        m = make("1.1.0", "manual", {"beam": {"handler": "beam:run", "version": "1.0.0", **IO}})
        with pytest.raises(Conflict) as caught:
            plan_deployment(m, {"beam": B}, history(stored("1.0.0", A)))
        assert "bump the version" in caught.value.message
        assert "1.0.1" in caught.value.message
        assert "beam" in caught.value.message

    def test_unchanged_version_and_checksum_is_unchanged(self) -> None:
        m = make("1.1.0", "manual", {"beam": {"handler": "beam:run", "version": "1.0.0", **IO}})
        (beam,) = plan_deployment(m, {"beam": A}, history(stored("1.0.0", A))).functions
        assert (beam.version, beam.status) == ("1.0.0", "unchanged")

    def test_per_function_override_of_the_package_strategy(self) -> None:
        m = make(
            "1.1.0",
            "auto",
            {"beam": {"handler": "beam:run", "version": "1.0.0", "versioning": "manual", **IO}},
        )
        with pytest.raises(Conflict):
            plan_deployment(m, {"beam": B}, history(stored("1.0.0", A)))

    def test_a_lower_version_is_allowed_with_a_warning(self) -> None:
        m = make("1.1.0", "manual", {"beam": {"handler": "beam:run", "version": "0.9.0", **IO}})
        plan = plan_deployment(m, {"beam": B}, history(stored("1.0.0", A)))
        assert plan.functions[0].version == "0.9.0"
        assert any("lower" in w for w in plan.warnings)


class TestPackageVersion:
    def test_an_existing_package_version_is_a_conflict_naming_the_versions(self) -> None:
        with pytest.raises(Conflict) as caught:
            plan_deployment(make("1.0.0+build.7"), {"beam": A}, history(stored("1.0.0", A)))
        assert "already exists" in caught.value.message
        assert caught.value.extra["versions"] == ["1.0.0"]

    @pytest.mark.parametrize(
        ("existing", "new", "is_latest"),
        [
            (("1.0.0",), "1.1.0", True),
            (("1.0.0", "2.0.0"), "1.5.0", False),
            (("1.0.0",), "1.1.0-rc.1", False),
            (("1.0.0-alpha",), "1.0.0-beta", True),
            (("1.0.0-beta",), "1.0.0-alpha.1", False),
            (("1.0.0-rc.1",), "0.9.0", True),
            (("1.0.0",), "1.0.1+build.3", True),
        ],
    )
    def test_is_latest(self, existing: tuple[str, ...], new: str, is_latest: bool) -> None:
        plan = plan_deployment(make(new), {"beam": A}, PackageHistory(existing))
        assert plan.is_latest is is_latest

    @pytest.mark.parametrize(
        ("version", "stable"),
        [("1.0.0", True), ("1.0.0-rc.1", False), ("1.0.0+b.1", True), ("0.1.0", True)],
    )
    def test_is_stable(self, version: str, stable: bool) -> None:
        assert plan_deployment(make(version), {"beam": A}).is_stable is stable

    def test_function_current_version_follows_the_latest_package_version(self) -> None:
        past = history(stored("1.0.0", A), packages=("1.0.0", "2.0.0"))
        (beam,) = plan_deployment(make("1.5.0"), {"beam": B}, past).functions
        assert not beam.becomes_current
        (beam,) = plan_deployment(make("2.1.0"), {"beam": B}, past).functions
        assert beam.becomes_current


class TestBreakingChanges:
    def test_a_breaking_changelog_entry_naming_the_function(self) -> None:
        changelog = {
            "1.1.0": {
                "changes": [{"type": "breaking", "description": "metres", "functions": ["beam"]}]
            }
        }
        (beam,) = plan_deployment(
            make(changelog=changelog), {"beam": B}, history(stored("1.0.0", A))
        ).functions
        assert beam.is_breaking_change
        assert beam.breaking_reasons == ("changelog: metres",)
        assert beam.changelog == "breaking: metres"

    def test_a_breaking_entry_naming_another_function_does_not_flag(self) -> None:
        changelog = {
            "1.1.0": {"changes": [{"type": "breaking", "description": "x", "functions": ["gone"]}]}
        }
        (beam,) = plan_deployment(
            make(changelog=changelog), {"beam": B}, history(stored("1.0.0", A))
        ).functions
        assert not beam.is_breaking_change

    def test_a_fix_is_not_breaking(self) -> None:
        changelog = {"1.1.0": {"changes": [{"type": "fix", "description": "sign"}]}}
        (beam,) = plan_deployment(
            make(changelog=changelog), {"beam": B}, history(stored("1.0.0", A))
        ).functions
        assert not beam.is_breaking_change
        assert beam.changelog == "fix: sign"

    def test_a_major_bump_is_breaking(self) -> None:
        m = make("2.0.0", "manual")
        (beam,) = plan_deployment(m, {"beam": B}, history(stored("1.0.0", A))).functions
        assert beam.is_breaking_change
        assert "MAJOR" in beam.breaking_reasons[0]

    def test_an_interface_break_is_breaking(self) -> None:
        io = {
            "inputs": {"length": {"type": "Length"}, "force": {"type": "Force"}},
            "outputs": {"moment": {"type": "Force"}},
        }
        m = make(functions={"beam": {"handler": "beam:run", **io}})
        (beam,) = plan_deployment(m, {"beam": B}, history(stored("1.0.0", A))).functions
        assert beam.is_breaking_change
        assert any("'force' was added as required" in r for r in beam.breaking_reasons)
        assert any("'moment' changed type" in r for r in beam.breaking_reasons)

    def test_an_optional_input_is_not_breaking(self) -> None:
        io = {
            "inputs": {"length": {"type": "Length"}, "n": {"type": "Integer", "required": False}},
            "outputs": {"moment": {"type": "Moment"}, "extra": {"type": "Float"}},
        }
        m = make(functions={"beam": {"handler": "beam:run", **io}})
        (beam,) = plan_deployment(m, {"beam": B}, history(stored("1.0.0", A))).functions
        assert not beam.is_breaking_change
