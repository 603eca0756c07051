"""pint's parsed unit definitions, cached in a private folder between starts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from calcgraph.domain.types import values
from calcgraph.domain.types.values import to_si, unit_registry
from calcgraph.ops.units import cache_units, private_folder


@pytest.fixture
def fresh_registry() -> Iterator[None]:
    """Each test builds its own registry; the process's is as before afterwards."""
    saved = list(values._definitions_cache)
    unit_registry.cache_clear()
    yield
    values._definitions_cache[:] = saved
    unit_registry.cache_clear()


CONVERSIONS = [(3, "kN", "Force"), (557, "cm**3", "Volume"), (210, "GPa", "Pressure")]


def _converted() -> list[float]:
    return [to_si(value, unit, type_name) for value, unit, type_name in CONVERSIONS]


@pytest.mark.usefixtures("fresh_registry")
class TestCachedDefinitions:
    def test_a_registry_from_the_cache_converts_as_a_parsed_one(self, tmp_path: Path) -> None:
        values._definitions_cache.clear()
        parsed = _converted()
        unit_registry.cache_clear()
        cache_units(tmp_path / "units")
        written = _converted()  # parses, then writes the cache
        assert list((tmp_path / "units").glob("*.pickle"))
        unit_registry.cache_clear()
        assert _converted() == written == parsed == [3000.0, pytest.approx(5.57e-4), 210e9]

    def test_a_damaged_cache_is_parsed_again_and_rewritten(self, tmp_path: Path) -> None:
        cache_units(tmp_path / "units")
        expected = _converted()
        for cached in (tmp_path / "units").glob("*.pickle"):
            cached.write_bytes(cached.read_bytes()[:100])  # a write cut short
        unit_registry.cache_clear()
        assert _converted() == expected
        unit_registry.cache_clear()
        cache_units(tmp_path / "units")
        assert _converted() == expected
        assert all(
            len(cached.read_bytes()) > 100 for cached in (tmp_path / "units").glob("*.pickle")
        )


class TestPrivateFolder:
    def test_created_for_this_user_alone(self, tmp_path: Path) -> None:
        folder = private_folder(tmp_path / "units")
        assert folder == tmp_path / "units"
        assert (folder.stat().st_mode & 0o777) == 0o700

    def test_an_open_folder_is_closed_to_others(self, tmp_path: Path) -> None:
        (tmp_path / "units").mkdir(mode=0o777)
        os.chmod(tmp_path / "units", 0o777)
        folder = private_folder(tmp_path / "units")
        assert folder is not None
        assert (folder.stat().st_mode & 0o777) == 0o700

    def test_a_link_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        (tmp_path / "units").symlink_to(tmp_path / "elsewhere")
        assert private_folder(tmp_path / "units") is None

    def test_a_file_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "units").write_text("")
        assert private_folder(tmp_path / "units") is None
