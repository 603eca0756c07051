"""Contract 11, Dependencies, as pure rules: which hosted version a range picks, the closure a
deployment pins, and what cannot be staged together."""

from __future__ import annotations

import pytest

from calcgraph.domain.errors import ValidationError
from calcgraph.domain.packages.dependency_rules import (
    Hosted,
    Pin,
    choose,
    closure,
    import_name,
    resolve_direct,
    staged_files,
    top_level_modules,
    unknown,
)
from calcgraph.domain.packages.semver_rules import parse_range

VERSIONS = ["1.0.0", "1.2.0", "1.3.0-rc.1", "2.0.0", "2.1.0-beta.1"]


@pytest.mark.parametrize(
    ("wanted", "picked"),
    [
        ("^1.0", "1.2.0"),  # the newest admitted, never the rc however new
        (">=1.0.0", "2.0.0"),
        ("*", "2.0.0"),
        ("~1.0", "1.0.0"),
        (">=1.3.0-rc.1,<2", "1.3.0-rc.1"),  # the range names a pre-release: it may pick one
        (">=2.1.0-beta.1", "2.1.0-beta.1"),
        ("1.2.0", "1.2.0"),
        (">=3", None),
        ("^0.1", None),
    ],
)
def test_choose_the_newest_admitted(wanted: str, picked: str | None) -> None:
    assert choose(parse_range(wanted), VERSIONS) == picked


def test_import_name_writes_dashes_as_underscores() -> None:
    assert import_name("demo-beam") == "demo_beam"
    assert import_name("units_lib") == "units_lib"


def hosted(name: str, *versions: str) -> Hosted:
    return Hosted(f"id-{name}", name, {v: f"{name}@{v}" for v in versions})


class TestResolveDirect:
    def test_pins_by_name_without_regard_to_case(self) -> None:
        pins = resolve_direct(
            {"Demo-Beam": parse_range("^1")}, {"demo-beam": hosted("demo-beam", "1.0.0", "1.1.0")}
        )
        assert [(p.name, p.version, p.version_id, p.range) for p in pins] == [
            ("demo-beam", "1.1.0", "demo-beam@1.1.0", "^1")
        ]

    def test_hidden_and_missing_packages_read_alike(self) -> None:
        with pytest.raises(ValidationError) as caught:
            resolve_direct({"secret": parse_range("^1")}, {})
        assert caught.value.errors[0].msg == unknown("secret")
        assert "secret" in caught.value.message

    def test_nothing_admitted_lists_the_versions(self) -> None:
        with pytest.raises(ValidationError) as caught:
            resolve_direct({"lib": parse_range(">=2")}, {"lib": hosted("lib", "1.2.0", "1.0.0")})
        message = caught.value.errors[0].msg
        assert "'lib'" in message
        assert "versions: 1.0.0, 1.2.0" in message
        assert caught.value.errors[0].loc == ("manifest", "package", "dependencies", "lib")


def pin(name: str, version: str, *, direct: bool = True) -> Pin:
    return Pin(name, version, f"id-{name}", f"{name}@{version}", direct)


class TestClosure:
    def test_transitive_pins_come_along_as_pinned(self) -> None:
        a = pin("a", "1.0.0")
        found = closure("app", [a], {a.version_id: [pin("b", "2.0.0"), pin("c", "0.1.0")]}, [])
        assert [(p.name, p.version, p.direct) for p in found] == [
            ("a", "1.0.0", True),
            ("b", "2.0.0", False),
            ("c", "0.1.0", False),
        ]

    def test_the_same_version_twice_is_one_member(self) -> None:
        a, b = pin("a", "1.0.0"), pin("b", "2.0.0")
        found = closure("app", [a, b], {a.version_id: [pin("b", "2.0.0")]}, [])
        assert [(p.name, p.direct) for p in found] == [("a", True), ("b", True)]

    def test_two_versions_of_one_package_are_422_naming_both_paths(self) -> None:
        a, b = pin("a", "1.0.0"), pin("b", "2.0.0")
        with pytest.raises(ValidationError) as caught:
            closure("app", [a, b], {a.version_id: [pin("b", "1.0.0")]}, [])
        message = caught.value.message
        assert "two versions of package 'b'" in message
        assert "2.0.0 declared" in message
        assert "1.0.0 via a 1.0.0" in message

    def test_the_package_itself_in_its_closure_is_422(self) -> None:
        a = pin("a", "1.0.0")
        with pytest.raises(ValidationError, match="'app' is in its own dependency closure"):
            closure("app", [a], {a.version_id: [pin("app", "0.9.0")]}, [])

    @pytest.mark.parametrize(
        "own", [["demo_beam.py"], ["demo_beam/__init__.py"], ["demo_beam/x.py"]]
    )
    def test_an_import_name_of_the_own_files_is_422(self, own: list[str]) -> None:
        with pytest.raises(ValidationError, match="also a module of this package's own files"):
            closure("app", [pin("demo-beam", "1.0.0")], {}, ["main.py", *own])

    def test_two_members_with_one_import_name_are_422(self) -> None:
        with pytest.raises(ValidationError, match="both imported as 'a_b'"):
            closure("app", [pin("a-b", "1.0.0"), pin("a_b", "1.0.0")], {}, [])

    def test_a_name_that_is_no_identifier_is_422(self) -> None:
        with pytest.raises(ValidationError, match="not a Python identifier"):
            closure("app", [pin("2d.lib", "1.0.0")], {}, [])


def test_top_level_modules() -> None:
    assert top_level_modules(["main.py", "lib/a.py", "data.json", "README"]) == {
        "main",
        "lib",
        "data",
        "README",
    }


def test_staged_files_put_each_dependency_under_its_import_name() -> None:
    files = staged_files(
        {"main.py": "m"}, [("demo-beam", {"beam.py": "b", "sub/x.py": "x"}), ("u", {"u.py": "u"})]
    )
    assert files == {
        "main.py": "m",
        "demo_beam/beam.py": "b",
        "demo_beam/sub/x.py": "x",
        "u/u.py": "u",
    }


def test_fifty_dependencies_are_refused_by_the_manifest() -> None:
    from calcgraph.domain.packages.manifest import parse_manifest

    manifest = {
        "kind": "package",
        "version": 1,
        "package": {
            "name": "many",
            "version": "1.0.0",
            "dependencies": {f"lib-{i}": "*" for i in range(50)},
        },
        "functions": {"run": {"handler": "main:run"}},
    }
    with pytest.raises(ValidationError) as caught:
        parse_manifest(manifest)
    assert [e.msg for e in caught.value.errors] == ["at most 49 dependencies, not 50"]
    del manifest["package"]["dependencies"]["lib-0"]  # type: ignore[attr-defined]
    assert len(parse_manifest(manifest).package.dependencies) == 49
