"""The Python distributions installed in an artifact directory (`pip install --target DIR`)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

from calcgraph.domain.builds.advisories import InstalledDistribution


def installed_distributions(target: Path) -> list[InstalledDistribution]:
    """Every distribution with a `*.dist-info` or `*.egg-info` directly in `target`, by name.

    importlib.metadata reads the same METADATA files pip writes, so this is what Python itself
    would find with `target` on sys.path. A distribution whose metadata lacks a name or a version
    cannot be matched against anything and is left out; a name seen twice counts once.
    """
    if not target.is_dir():
        raise FileNotFoundError(f"artifact directory {target} does not exist")
    found: dict[str, InstalledDistribution] = {}
    for dist in metadata.distributions(path=[str(target)]):
        # get_all() gives None for a missing field, where the typed attributes may raise.
        name = _first(dist.metadata.get_all("Name"))
        version = _first(dist.metadata.get_all("Version"))
        if not name or not version:
            continue
        found.setdefault(canonicalize_name(name), InstalledDistribution(name, version))
    return sorted(found.values(), key=lambda d: canonicalize_name(d.name))


def _first(values: list[str] | None) -> str | None:
    return values[0].strip() if values else None
