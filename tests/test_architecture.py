"""Rules of the house that a machine can check."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "calcgraph"
FRAMEWORKS = {
    "sqlalchemy",
    "starlette",
    "strawberry",
    "graphql",
    "dramatiq",
    "docker",
    "redis",
    "httpx",
    "uvicorn",
    "asyncpg",
    "aiosqlite",
    "alembic",
    "pydantic_settings",
}
# Modules of a feature that are allowed to touch I/O: everything else under domain/ decides.
IMPURE = {"service.py", "repository.py", "models.py", "loaders.py", "__init__.py"}


def pure_modules() -> list[Path]:
    return sorted(path for path in (ROOT / "domain").rglob("*.py") if path.name not in IMPURE)


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
            if node.module.startswith("calcgraph.") and not node.module.startswith(
                "calcgraph.domain"
            ):
                roots.add(node.module)
    return roots


def test_there_are_pure_modules_to_check() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in pure_modules()}
    assert {"domain/types/compat.py", "domain/types/expr.py", "domain/errors.py"} <= names


@pytest.mark.parametrize("path", pure_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pure_rules_import_no_framework(path: Path) -> None:
    roots = imported_roots(path)
    assert not roots & FRAMEWORKS, f"{path.name} imports {sorted(roots & FRAMEWORKS)}"
    outside = {r for r in roots if r.startswith("calcgraph.")}
    assert not outside, f"{path.name} reaches outside the domain: {sorted(outside)}"


def test_only_settings_reads_the_environment() -> None:
    offenders = [
        path.relative_to(ROOT).as_posix()
        for path in ROOT.rglob("*.py")
        if path.name != "settings.py"
        and ("os.environ" in path.read_text() or "getenv" in path.read_text())
    ]
    assert offenders == []


def test_services_never_commit() -> None:
    offenders = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "domain").rglob("service.py")
        if ".commit(" in path.read_text()
    ]
    assert offenders == []


def calcgraph_imports(path: Path) -> set[str]:
    """Every calcgraph module `path` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("calcgraph."))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("calcgraph."):
                found.add(node.module)
    return found


# The domain acts on the world through ports (protocols) that the doors fill in; it renders
# no wire format, so it knows neither the adapters nor the doors.
OUTSIDE_THE_DOMAIN = (
    "calcgraph.builds",
    "calcgraph.sources",
    "calcgraph.workers",
    "calcgraph.rest_compat",
    "calcgraph.schema",
    "calcgraph.resolvers",
    "calcgraph.auth",
)


def _reaches(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "domain").rglob("*.py")),
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_the_domain_imports_no_adapter_and_no_door(path: Path) -> None:
    assert _reaches(calcgraph_imports(path), OUTSIDE_THE_DOMAIN) == []


def test_auth_imports_no_door() -> None:
    offenders = {
        path.relative_to(ROOT).as_posix(): reached
        for path in sorted((ROOT / "auth").rglob("*.py"))
        if (reached := _reaches(calcgraph_imports(path), ("calcgraph.rest_compat",)))
    }
    assert offenders == {}
