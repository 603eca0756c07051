"""Package dependencies resolved at deployment and pinned (contract 11, Dependencies). Pure.

- Each `package.dependencies` entry `name: range` resolves to the newest hosted version of
  that package that the deployer may see and the range admits. A pre-release is a candidate
  only when the range names a pre-release itself (`>=2.0.0-rc.1`): `^1.2` never picks
  `1.3.0-rc.1`, however new. None admitted → 422 naming the dependency and the versions
  there are. A package the deployer may not see gets word for word the refusal of a package
  that does not exist: the answer reveals nothing about it.
- Dependencies of dependencies come along as they were pinned when their package was
  deployed (not resolved again, not checked again against the deployer's rights: the
  dependency's own deployment checked its deployer's). Two versions of one package in the
  closure, or the deploying package itself in it, → 422 naming the paths that bring them.
- Import names: a dependency's files are staged under its name with `-` written `_`
  (`demo-beam` → `demo_beam/`). A name that is not then a Python identifier, two members of
  the closure with the same import name, or an import name that is also a top-level module or
  folder of the package's own files (which would hide one of the two) → 422.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.packages.semver_rules import VersionRange, parse_version, sort_versions
from calcgraph.domain.read_models import attributes

_LOC = ("manifest", "package", "dependencies")


def import_name(package_name: str) -> str:
    """The top-level module a dependency's files are staged under."""
    return package_name.replace("-", "_")


@dataclass(frozen=True)
class Hosted:
    """A package the deployer may see, with every hosted version (version -> deployment id)."""

    package_id: str
    name: str
    versions: Mapping[str, str]


@dataclass(frozen=True)
class Pin:
    """One member of a package version's dependency closure."""

    name: str
    version: str
    package_id: str
    version_id: str
    """The pinned deployment (`package_versions.id`)."""
    direct: bool = True
    range: str | None = None
    """The declared range, for a direct dependency."""
    via: str | None = None
    """`name version` of the direct dependency that brought a transitive one along."""

    @property
    def import_name(self) -> str:
        return import_name(self.name)

    def as_dict(self) -> dict[str, object]:
        return attributes(self, "name", "version", "package_id", "version_id", "direct", "range")


def admits_prerelease(wanted: VersionRange) -> bool:
    return any(c.version.prerelease is not None for c in wanted.comparators)


def choose(wanted: VersionRange, versions: Iterable[str]) -> str | None:
    """The newest of `versions` that `wanted` admits (pre-releases only when it names one)."""
    prerelease = admits_prerelease(wanted)
    admitted = [
        v
        for v in versions
        if wanted.contains(v) and (prerelease or parse_version(v).prerelease is None)
    ]
    return sort_versions(admitted)[-1] if admitted else None


def unknown(name: str) -> str:
    """The one refusal for a package that does not exist and one the deployer may not see."""
    return f"dependency {name!r}: no package {name!r} that you can see is hosted here"


def resolve_direct(
    declared: Mapping[str, VersionRange], hosted: Mapping[str, Hosted]
) -> tuple[Pin, ...]:
    """Direct pins; `hosted` holds the packages the deployer may see, by lowercased name."""
    pins: list[Pin] = []
    errors: list[FieldError] = []
    for name, wanted in declared.items():
        found = hosted.get(name.lower())
        if found is None:
            errors.append(FieldError((*_LOC, name), unknown(name)))
            continue
        chosen = choose(wanted, found.versions)
        if chosen is None:
            there = ", ".join(sort_versions(found.versions)) or "none"
            errors.append(
                FieldError(
                    (*_LOC, name),
                    f"dependency {name!r}: no hosted version is admitted by {wanted.text!r} "
                    f"(versions: {there})",
                )
            )
            continue
        pins.append(
            Pin(found.name, chosen, found.package_id, found.versions[chosen], range=wanted.text)
        )
    _raise(errors)
    return tuple(pins)


def closure(
    package_name: str,
    direct: Sequence[Pin],
    pinned_by: Mapping[str, Sequence[Pin]],
    own_files: Iterable[str],
) -> tuple[Pin, ...]:
    """Direct pins and what they bring along, each package once; `pinned_by` maps a pinned
    deployment id to its stored closure. Refuses (422) what cannot be staged together."""
    members: dict[str, list[Pin]] = {}
    for pin in direct:
        members.setdefault(pin.package_id, []).append(pin)
    for pin in direct:
        for brought in pinned_by.get(pin.version_id, ()):
            members.setdefault(brought.package_id, []).append(
                replace(brought, direct=False, range=None, via=f"{pin.name} {pin.version}")
            )
    errors: list[FieldError] = []
    chosen: list[Pin] = []
    for pins in members.values():
        versions = {p.version for p in pins}
        first = pins[0]
        if first.name.lower() == package_name.lower():
            paths = "; ".join(_path(p) for p in pins)
            errors.append(
                FieldError(
                    (*_LOC, first.via.split(" ")[0] if first.via else first.name),
                    f"package {package_name!r} is in its own dependency closure ({paths})",
                )
            )
        elif len(versions) > 1:
            paths = "; ".join(_path(p) for p in pins)
            errors.append(
                FieldError(
                    (*_LOC, first.name),
                    f"two versions of package {first.name!r} in the dependency closure "
                    f"({paths}): align the ranges so one version serves all",
                )
            )
        else:
            chosen.append(next((p for p in pins if p.direct), first))
    _raise(errors)
    _check_import_names(chosen, own_files)
    return tuple(sorted(chosen, key=lambda p: (not p.direct, p.name.lower())))


def _path(pin: Pin) -> str:
    return f"{pin.version} via {pin.via}" if pin.via else f"{pin.version} declared"


def top_level_modules(paths: Iterable[str]) -> set[str]:
    """The names a package's own files take at the top of `sys.path`: `x.py`, `x/...`."""
    names: set[str] = set()
    for path in paths:
        head, _, rest = path.partition("/")
        if rest:
            names.add(head)
        elif head.endswith(".py"):
            names.add(head[: -len(".py")])
        else:
            names.add(head.split(".", 1)[0])
    return names


def _check_import_names(pins: Sequence[Pin], own_files: Iterable[str]) -> None:
    own = top_level_modules(own_files)
    errors: list[FieldError] = []
    seen: dict[str, Pin] = {}
    for pin in pins:
        module = pin.import_name
        loc = (*_LOC, pin.name if pin.direct else (pin.via or pin.name).split(" ")[0])
        if not module.isidentifier():
            errors.append(
                FieldError(
                    loc,
                    f"dependency {pin.name!r}: its import name {module!r} is not a Python "
                    "identifier, so handlers could not import it",
                )
            )
        elif module in own:
            errors.append(
                FieldError(
                    loc,
                    f"dependency {pin.name!r} is imported as {module!r}, which is also a module "
                    f"of this package's own files ({module}.py or {module}/): rename one",
                )
            )
        elif module in seen:
            errors.append(
                FieldError(
                    loc,
                    f"dependencies {seen[module].name!r} and {pin.name!r} are both imported as "
                    f"{module!r}",
                )
            )
        seen.setdefault(module, pin)
    _raise(errors)


def staged_files(
    own: Mapping[str, str], pins: Iterable[tuple[str, Mapping[str, str]]]
) -> dict[str, str]:
    """What a sandbox stages for a function version: its package's files (path -> sha256) and
    each pinned dependency's under its import name. The result's digest names the staged
    folder, so a different pin is a different folder and a different warm sandbox."""
    files = dict(own)
    for name, dependency_files in pins:
        prefix = import_name(name)
        for path, sha in dependency_files.items():
            files.setdefault(f"{prefix}/{path}", sha)
    return files


def pin_map(pins: Iterable[Pin], *, direct_only: bool = False) -> dict[str, str]:
    """`{name: version}`, as the deployment report shows pins."""
    return {p.name: p.version for p in pins if p.direct or not direct_only}


def _raise(errors: Sequence[FieldError]) -> None:
    if errors:
        raise ValidationError(
            "the package's dependencies cannot be resolved: " + "; ".join(e.msg for e in errors),
            errors,
        )
