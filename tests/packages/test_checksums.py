"""Code checksums: normalised line endings, the import closure, and the manifest checks."""

from __future__ import annotations

import hashlib

import pytest

from calcgraph.domain.errors import ValidationError
from calcgraph.domain.packages.checksums import (
    code_files,
    function_checksum,
    function_checksums,
    normalise_line_endings,
    source_checksum,
)
from calcgraph.domain.packages.manifest import Manifest, parse_manifest

BEAM = "def cantilever(length, force):\n    return {'moment': length * force}\n"


def manifest(handler: str = "beam:cantilever", checksum: str | None = None) -> Manifest:
    function: dict[str, object] = {"handler": handler}
    if checksum is not None:
        function["checksum"] = checksum
    return parse_manifest(
        {
            "kind": "package",
            "version": 1,
            "package": {"name": "demo", "version": "1.0.0"},
            "functions": {"cantilever": function},
        }
    )


class TestLineEndings:
    def test_crlf_and_cr_become_lf(self) -> None:
        assert normalise_line_endings(b"a\r\nb\rc\n") == b"a\nb\nc\n"
        assert normalise_line_endings("a\r\n\r\nb") == b"a\n\nb"

    def test_same_checksum_whatever_the_line_endings(self) -> None:
        unix = source_checksum(BEAM)
        assert source_checksum(BEAM.replace("\n", "\r\n")) == unix
        assert source_checksum(BEAM.replace("\n", "\r").encode()) == unix

    def test_a_lone_module_is_the_sha256_of_its_source(self) -> None:
        files = {"beam.py": BEAM.replace("\n", "\r\n"), "other.py": "x = 1\n"}
        expected = hashlib.sha256(BEAM.encode()).hexdigest()
        assert function_checksum("beam", files) == expected

    def test_any_other_change_changes_it(self) -> None:
        assert source_checksum(BEAM) != source_checksum(BEAM + " ")


class TestImportClosure:
    FILES = {
        "beam.py": "from helpers.units import mm\nimport numpy\n\ndef cantilever(): return mm\n",
        "helpers/__init__.py": "",
        "helpers/units.py": "from . import consts\nfrom .deep.more import x\nmm = 1e-3\n",
        "helpers/consts.py": "G = 9.81\n",
        "helpers/deep/__init__.py": "",
        "helpers/deep/more.py": "x = 1\n",
        "unrelated.py": "y = 2\n",
        "calcgraph.yaml": "kind: package\n",
    }

    def test_the_closure_follows_absolute_relative_and_parent_imports(self) -> None:
        assert code_files("beam", self.FILES) == (
            "beam.py",
            "helpers/__init__.py",
            "helpers/consts.py",
            "helpers/deep/__init__.py",
            "helpers/deep/more.py",
            "helpers/units.py",
        )

    def test_a_helper_change_changes_the_checksum_an_unrelated_one_does_not(self) -> None:
        before = function_checksum("beam", self.FILES)
        assert function_checksum("beam", {**self.FILES, "unrelated.py": "y = 3\n"}) == before
        assert function_checksum("beam", {**self.FILES, "helpers/consts.py": "G = 9.8\n"}) != before

    def test_paths_are_normalised(self) -> None:
        windows = {k.replace("/", "\\"): v for k, v in self.FILES.items()}
        assert function_checksum("beam", windows) == function_checksum("beam", self.FILES)

    def test_handler_in_a_subpackage_includes_its_parents(self) -> None:
        assert code_files("helpers.units", self.FILES)[0] == "helpers/__init__.py"


class TestFunctionChecksums:
    def test_checksums_by_function(self) -> None:
        sums = function_checksums(manifest(), {"beam.py": BEAM})
        assert sums == {"cantilever": source_checksum(BEAM)}

    def test_missing_module(self) -> None:
        with pytest.raises(ValidationError) as caught:
            function_checksums(manifest("beams:cantilever"), {"beam.py": BEAM})
        (error,) = caught.value.errors
        assert error.loc == ("functions", "cantilever", "handler")
        assert "beams.py" in error.msg

    def test_syntax_error_names_file_and_line(self) -> None:
        with pytest.raises(ValidationError) as caught:
            function_checksums(manifest(), {"beam.py": "def f(:\n"})
        (error,) = caught.value.errors
        assert error.loc == ("files", "beam.py")
        assert "line 1" in error.msg

    def test_declared_checksum_must_match(self) -> None:
        good = source_checksum(BEAM)
        m = manifest(checksum=f"sha256:{good.upper()}")
        assert function_checksums(m, {"beam.py": BEAM}) == {"cantilever": good}
        with pytest.raises(ValidationError) as caught:
            function_checksums(manifest(checksum="0" * 64), {"beam.py": BEAM})
        assert caught.value.errors[0].loc == ("functions", "cantilever", "checksum")


def test_a_package_directory_wins_over_a_module_of_the_same_name() -> None:
    files = {"beam.py": "a = 1\n", "beam/__init__.py": "b = 2\n"}
    assert code_files("beam", files) == ("beam/__init__.py",)
