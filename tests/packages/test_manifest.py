"""The manifest `calcgraph.yaml`: every key, every kind of error with its path, all at once."""

from __future__ import annotations

import copy
import textwrap
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from calcgraph.domain.errors import ValidationError
from calcgraph.domain.packages.manifest import parse_handler, parse_manifest

CONTRACT_EXAMPLE = """\
kind: package
version: 1
package:
  name: demo-beam
  version: 1.2.0
  versioning_strategy: auto
functions:
  cantilever:
    handler: beam:cantilever          # module beam.py, callable cantilever
    inputs:
      length: {type: Length, description: span, required: true}
      force:  {type: Force, description: tip load, required: true}
    outputs:
      deflection: {type: Length, description: tip deflection}
      moment:     {type: Moment, description: root bending moment}
"""

FULL = """\
kind: package
version: 1
package:
  name: demo-beam
  version: 2.0.0-rc.1
  description: Beam formulas
  versioning_strategy: manual
  changelog:
    2.0.0-rc.1:
      date: 2024-05-01
      changes:
        - {type: breaking, description: length in m, functions: [cantilever], issue: 42,
           migration: convert mm to m}
        - {type: feature, description: stress check}
    1.2.0:
      changes:
        - {type: fix, description: sign of moment, functions: [old_function], issue: "#7"}
  migration_guide: {2.0.0-rc.1: "Lengths are metres now."}
  compatibility:
    compatible_with: [">=1.2.0,<2.0.0", "^1.1"]
    breaking_changes_from: 2.0.0
  dependencies:
    units-lib: ">=1.2,<2"
    helpers: ~0.3.1
  deployment:
    strategy: canary
    canary:
      enabled: true
      traffic_split: {2.0.0-rc.1: 10, 1.2.0: 90}
      duration: 1h30m
      success_criteria: {error_rate_max: "2%", latency_p95_max: 250}
functions:
  cantilever:
    handler: beams.cantilever:solve
    version: 2.0.0
    checksum: sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
    versioning: manual
    changelog: {2.0.0: metres}
    inputs:
      length: {type: Length, description: span}
      loads: {type: "list[{f: Force, at: Length}]", required: false}
    outputs:
      moment: {type: Moment}
  legacy:
    handler: beam:legacy
    deprecated: true
    deprecated_message: use cantilever
    removal_version: 3.0.0
"""


def errors_of(source: Any) -> dict[tuple[str | int, ...], str]:
    with pytest.raises(ValidationError) as caught:
        parse_manifest(source)
    found: dict[tuple[str | int, ...], str] = {}
    for error in caught.value.errors:
        found[error.loc] = f"{found[error.loc]}; {error.msg}" if error.loc in found else error.msg
    return found


def contract() -> dict[str, Any]:
    loaded = yaml.safe_load(CONTRACT_EXAMPLE)
    assert isinstance(loaded, dict)
    return loaded


class TestValidManifests:
    def test_the_contract_example_parses(self) -> None:
        manifest = parse_manifest(CONTRACT_EXAMPLE)
        assert manifest.package.name == "demo-beam"
        assert manifest.package.version == "1.2.0"
        assert manifest.package.versioning_strategy == "auto"
        cantilever = manifest.functions["cantilever"]
        assert (cantilever.module, cantilever.callable) == ("beam", "cantilever")
        assert cantilever.typed
        assert cantilever.inputs_schema() == {
            "length": {"type": "Length", "description": "span", "required": True},
            "force": {"type": "Force", "description": "tip load", "required": True},
        }
        assert cantilever.outputs_schema() == {
            "deflection": {"type": "Length", "description": "tip deflection"},
            "moment": {"type": "Moment", "description": "root bending moment"},
        }

    def test_a_decoded_mapping_parses_like_the_text(self) -> None:
        assert parse_manifest(contract()) == parse_manifest(CONTRACT_EXAMPLE)

    def test_every_key_of_the_specification(self) -> None:
        manifest = parse_manifest(FULL)
        package = manifest.package
        assert package.versioning_strategy == "manual"
        release = package.release("2.0.0-rc.1")
        assert release is not None
        assert release.date == "2024-05-01"
        breaking = release.changes[0]
        assert (breaking.type, breaking.functions, breaking.issue) == (
            "breaking",
            ("cantilever",),
            "42",
        )
        assert breaking.migration == "convert mm to m"
        assert package.migration_guide == {"2.0.0-rc.1": "Lengths are metres now."}
        assert package.compatibility is not None
        assert package.compatibility.compatible_with[0].contains("1.5.0")
        assert not package.compatibility.compatible_with[0].contains("2.0.0")
        assert package.compatibility.breaking_changes_from == "2.0.0"
        assert package.dependencies["units-lib"].contains("1.9.9")
        assert not package.dependencies["helpers"].contains("0.4.0")
        canary = package.deployment.canary
        assert package.deployment.strategy == "canary"
        assert canary is not None
        assert canary.traffic_split == {"2.0.0-rc.1": 10.0, "1.2.0": 90.0}
        assert canary.duration_seconds == 5400
        assert canary.success_criteria.error_rate_max == pytest.approx(0.02)
        assert canary.success_criteria.latency_p95_max_ms == 250
        cantilever = manifest.functions["cantilever"]
        assert cantilever.module == "beams.cantilever"
        assert cantilever.checksum == "a" * 64
        assert cantilever.changelog_for("2.0.0") == "metres"
        assert manifest.strategy_of("cantilever") == "manual"
        assert cantilever.inputs_schema() == {
            "length": {"type": "Length", "description": "span", "required": True},
            "loads": {
                "type": "list[{f: Force, at: Length}]",
                "description": None,
                "required": False,
            },
        }
        legacy = manifest.functions["legacy"]
        assert legacy.deprecated
        assert legacy.removal_version == "3.0.0"
        assert legacy.deprecated_message == "use cantilever"

    def test_as_json_is_json_and_parses_back(self) -> None:
        manifest = parse_manifest(FULL)
        as_json = manifest.as_json()
        assert yaml.safe_load(yaml.safe_dump(as_json)) == as_json
        assert parse_manifest(as_json).as_json() == as_json

    def test_the_top_level_name_of_the_function_manifest_table(self) -> None:
        data = contract()
        del data["package"]["name"]
        data["name"] = "demo-beam"
        assert parse_manifest(data).package.name == "demo-beam"
        data["package"]["name"] = "other"
        assert ("name",) in errors_of(data)

    def test_untyped_function_is_accepted_and_marked(self) -> None:
        data = contract()
        data["functions"]["raw"] = {"handler": "beam:raw"}
        raw = parse_manifest(data).functions["raw"]
        assert not raw.typed
        assert raw.inputs_schema() is None
        assert raw.outputs_schema() is None

    def test_typed_function_without_inputs(self) -> None:
        data = contract()
        data["functions"]["now"] = {
            "handler": "clock:now",
            "inputs": {},
            "outputs": {"t": {"type": "Time"}},
        }
        assert parse_manifest(data).functions["now"].typed


class TestErrors:
    def test_yaml_syntax_error_names_line(self) -> None:
        errors = errors_of("kind: package\nfunctions: [a\n  b: c\n")
        assert list(errors) == [()]
        assert "line 3" in errors[()]

    def test_duplicate_keys_are_refused(self) -> None:
        assert "duplicate key 'kind'" in errors_of("kind: package\nkind: package\n")[()]

    def test_aliases_are_read_but_not_their_bombs(self) -> None:
        # Contract 7: anchors and aliases as yaml.safe_dump writes them are YAML 1.1.
        assert "aliases" not in str(errors_of("a: &x [1]\nb: *x\n"))
        assert "aliases refused" in errors_of("a: &x [*x]\n")[()]
        # Few nodes, but past the body limit once expanded.
        wide = "a: &s " + "x" * 30_000 + "\nb: [" + ", ".join(["*s"] * 100) + "]\n"
        assert "bytes" in errors_of(wide)[()]

    @pytest.mark.parametrize("text", ["", "- 1\n- 2", "just text", "42"])
    def test_not_a_mapping(self, text: str) -> None:
        assert () in errors_of(text)

    def test_unknown_keys_are_refused_with_a_suggestion(self) -> None:
        data = contract()
        data["functions"]["cantilever"]["hanlder"] = data["functions"]["cantilever"].pop("handler")
        data["package"]["versoning_strategy"] = "auto"
        data["functions"]["cantilever"]["outputs"]["moment"]["required"] = True
        errors = errors_of(data)
        assert "did you mean 'handler'" in errors[("functions", "cantilever", "hanlder")]
        assert errors[("functions", "cantilever", "handler")] == "is required"
        assert "versioning_strategy" in errors[("package", "versoning_strategy")]
        assert ("functions", "cantilever", "outputs", "moment", "required") in errors

    def test_every_problem_is_reported_at_once_with_its_path(self) -> None:
        data = contract()
        data["kind"] = "pkg"
        data["version"] = 2
        data["package"]["version"] = "1.2"
        data["package"]["versioning_strategy"] = "sometimes"
        data["package"]["dependencies"] = {"units": ">=1.x", "bad name": "*"}
        fn = data["functions"]["cantilever"]
        fn["handler"] = "beam"
        fn["inputs"]["length"]["type"] = "Lenght"
        fn["inputs"]["force"]["required"] = "yes"
        fn["outputs"]["moment"]["type"] = "list[Momentum]"
        fn["removal_version"] = "3"
        errors = errors_of(data)
        expected = {
            ("kind",): "package",
            ("version",): "format version",
            ("package", "version"): "not a semantic version",
            ("package", "versioning_strategy"): "auto, manual",
            ("package", "dependencies", "units"): "not a version range",
            ("package", "dependencies", "bad name"): "not a package name",
            ("functions", "cantilever", "handler"): "<module>:<callable>",
            ("functions", "cantilever", "inputs", "length", "type"): "did you mean 'Length'",
            ("functions", "cantilever", "inputs", "force", "required"): "true or false",
            ("functions", "cantilever", "outputs", "moment", "type"): "Momentum",
            ("functions", "cantilever", "removal_version"): "not a semantic version",
        }
        for loc, fragment in expected.items():
            assert fragment in errors[loc], (loc, errors.get(loc))
        # removal_version without deprecated is a second problem on the same key
        assert len(errors) >= len(expected)

    @pytest.mark.parametrize(
        ("handler", "fragment"),
        [
            ("beam", "<module>:<callable>"),
            ("beam:", "not a Python identifier"),
            (":run", "dotted path"),
            ("beam-x:run", "dotted path"),
            ("beam..x:run", "dotted path"),
            ("beam:run:x", "<module>:<callable>"),
            ("class:run", "dotted path"),
            ("beam:2run", "not a Python identifier"),
        ],
    )
    def test_bad_handlers(self, handler: str, fragment: str) -> None:
        result = parse_handler(handler)
        assert isinstance(result, str)
        assert fragment in result
        data = contract()
        data["functions"]["cantilever"]["handler"] = handler
        assert fragment in errors_of(data)[("functions", "cantilever", "handler")]

    def test_good_handlers(self) -> None:
        assert parse_handler("pkg.sub.mod:run_it") == ("pkg.sub.mod", "run_it")

    def test_bad_versions_and_ranges(self) -> None:
        data = contract()
        data["package"]["version"] = 1.2
        data["package"]["dependencies"] = {"a": "^x", "b": 2, "c": ">=1.0.0,", "d": ""}
        errors = errors_of(data)
        assert "quote it" in errors[("package", "version")]
        for name in "abcd":
            assert ("package", "dependencies", name) in errors

    def test_changelog_problems(self) -> None:
        data = contract()
        data["package"]["changelog"] = {
            "1.2.0": {
                "date": "2024-13-01",
                "changes": [
                    {"type": "bug", "description": "x"},
                    {"type": "fix", "description": "y", "functions": ["cantilevr"]},
                    {"description": "z", "extra": 1},
                ],
            },
            "1.x": {"changes": []},
        }
        errors = errors_of(data)
        entry = ("package", "changelog", "1.2.0")
        assert "YYYY-MM-DD" in errors[(*entry, "date")]
        assert "feature, fix, breaking" in errors[(*entry, "changes", 0, "type")]
        assert "does not declare" in errors[(*entry, "changes", 1, "functions", 0)]
        assert errors[(*entry, "changes", 2, "type")] == "is required"
        assert (*entry, "changes", 2, "extra") in errors
        assert ("package", "changelog", "1.x") in errors

    def test_breaking_change_may_name_a_removed_function(self) -> None:
        data = contract()
        data["package"]["changelog"] = {
            "1.2.0": {
                "changes": [{"type": "breaking", "description": "removed", "functions": ["gone"]}]
            }
        }
        parse_manifest(data)

    def test_deployment_problems(self) -> None:
        data = contract()
        data["package"]["deployment"] = {
            "strategy": "canary",
            "canary": {
                "traffic_split": {"1.2.0": 50, "1.1.0": 40, "x": 10},
                "duration": "soon",
                "success_criteria": {"error_rate_max": 5, "latency_p95_max": -1, "p99": 3},
            },
        }
        errors = errors_of(data)
        canary = ("package", "deployment", "canary")
        assert "add up to 100" in errors[(*canary, "traffic_split")]
        assert (*canary, "traffic_split", "x") in errors
        assert (*canary, "duration") in errors
        assert "between 0 and 1" in errors[(*canary, "success_criteria", "error_rate_max")]
        assert (*canary, "success_criteria", "latency_p95_max") in errors
        assert (*canary, "success_criteria", "p99") in errors

    def test_deployment_strategy_values(self) -> None:
        data = contract()
        data["package"]["deployment"] = {"strategy": "big-bang"}
        assert (
            "rolling, blue-green, canary" in errors_of(data)[("package", "deployment", "strategy")]
        )
        data["package"]["deployment"] = {"strategy": "canary"}
        assert ("package", "deployment", "canary") in errors_of(data)
        data["package"]["deployment"] = {"strategy": "rolling", "canary": {"enabled": False}}
        assert "only to the canary" in errors_of(data)[("package", "deployment", "canary")]

    def test_half_typed_function_is_refused(self) -> None:
        data = contract()
        del data["functions"]["cantilever"]["outputs"]
        assert "declare both" in errors_of(data)[("functions", "cantilever", "outputs")]

    def test_ports_must_be_identifiers_and_outputs_not_empty(self) -> None:
        data = contract()
        fn = data["functions"]["cantilever"]
        fn["inputs"]["class"] = {"type": "Force"}
        fn["inputs"]["two words"] = {"type": "Force"}
        fn["outputs"] = {}
        errors = errors_of(data)
        assert ("functions", "cantilever", "inputs", "class") in errors
        assert ("functions", "cantilever", "inputs", "two words") in errors
        assert "at least one output" in errors[("functions", "cantilever", "outputs")]

    def test_non_string_keys(self) -> None:
        text = CONTRACT_EXAMPLE + "  1.5: {handler: a:b}\n"
        assert "quote it" in errors_of(text)[("functions", "1.5")]

    def test_checksum_and_deprecation_fields(self) -> None:
        data = contract()
        fn = data["functions"]["cantilever"]
        fn["checksum"] = "md5:abc"
        fn["deprecated"] = "yes"
        fn["deprecated_message"] = "old"
        errors = errors_of(data)
        assert ("functions", "cantilever", "checksum") in errors
        assert ("functions", "cantilever", "deprecated") in errors
        assert "deprecated: true" in errors[("functions", "cantilever", "deprecated_message")]

    def test_versions_fit_their_columns(self) -> None:
        data = contract()
        data["package"]["version"] = "1.0.0-" + "a" * 100
        assert "at most 100" in errors_of(data)[("package", "version")]

    def test_no_functions(self) -> None:
        data = contract()
        data["functions"] = {}
        assert "at least one function" in errors_of(data)[("functions",)]
        del data["functions"]
        assert errors_of(data)[("functions",)] == "is required"


# --- robustness: nothing but ValidationError, whatever the input ------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["Length", "beam:run", "1.2.0", "^1.2", "auto", "package", "canary"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=10), st.integers()), inner, max_size=4),
    ),
    max_leaves=25,
)


def _mutate(data: dict[str, Any], path: list[str], value: object) -> dict[str, Any]:
    result = copy.deepcopy(data)
    target: Any = result
    for key in path[:-1]:
        if not isinstance(target, dict) or key not in target:
            return result
        target = target[key]
    if isinstance(target, dict):
        target[path[-1]] = value
    return result


PATHS = [
    ["kind"],
    ["version"],
    ["package"],
    ["package", "version"],
    ["package", "changelog"],
    ["package", "dependencies"],
    ["package", "deployment"],
    ["package", "compatibility"],
    ["package", "migration_guide"],
    ["functions"],
    ["functions", "cantilever"],
    ["functions", "cantilever", "inputs"],
    ["functions", "cantilever", "outputs", "moment"],
    ["functions", "cantilever", "inputs", "length", "type"],
    ["functions", "cantilever", "changelog"],
]


def outcome(source: Any) -> list[tuple[str | int, ...]] | None:
    """None when the manifest parses, else the error locations; any other exception fails."""
    try:
        parse_manifest(source)
    except ValidationError as exc:
        return [e.loc for e in exc.errors]
    return None


class TestRobustness:
    @settings(max_examples=300, deadline=None)
    @given(st.text(max_size=300))
    def test_random_text(self, text: str) -> None:
        assert outcome(text) != []

    @settings(max_examples=300, deadline=None)
    @given(values)
    def test_random_yaml_documents(self, value: object) -> None:
        assert outcome(yaml.safe_dump(value)) != []

    @settings(max_examples=400, deadline=None)
    @given(st.sampled_from(PATHS), values)
    def test_random_values_at_every_key(self, path: list[str], value: object) -> None:
        data = _mutate(contract(), path, value)
        locs = outcome(data)
        assert locs is None or (locs and all(isinstance(loc, tuple) for loc in locs))
        assert outcome(yaml.safe_dump(data)) != []

    def test_deep_nesting(self) -> None:
        assert () in errors_of("[" * 5000 + "]" * 5000)
        assert () in errors_of(
            textwrap.dedent("a:\n" + "".join(" " * i + "b:\n" for i in range(1, 3000)))
        )


def _canary_manifest(duration: object) -> dict[str, Any]:
    canary: dict[str, Any] = {"traffic_split": {"1.0.0": 90, "2.0.0": 10}}
    if duration is not None:
        canary["duration"] = duration
    return {
        "kind": "package",
        "version": 1,
        "package": {
            "name": "cn-dur",
            "version": "2.0.0",
            "deployment": {"strategy": "canary", "canary": canary},
        },
        "functions": {"run": {"handler": "main:run"}},
    }


class TestCanaryDuration:
    """Contract 11: `duration` in seconds or `30s`/`10m`/`1h`; the default (1 h) is the
    judging rule's when none is given."""

    @pytest.mark.parametrize(
        ("duration", "seconds"),
        [(45, 45), ("30s", 30), ("10m", 600), ("1h", 3600), ("1h30m", 5400), (None, None)],
    )
    def test_accepted(self, duration: object, seconds: int | None) -> None:
        canary = parse_manifest(_canary_manifest(duration)).package.deployment.canary
        assert canary is not None
        assert canary.duration_seconds == seconds

    @pytest.mark.parametrize("duration", [0, -5, "0s", "-5m", "forever", "1d", True, 1.5, ""])
    def test_refused(self, duration: object) -> None:
        found = errors_of(_canary_manifest(duration))
        assert ("package", "deployment", "canary", "duration") in found, found
