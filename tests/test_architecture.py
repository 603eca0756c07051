"""Rules of the house that a machine can check."""

from __future__ import annotations

import ast
import functools
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
        if path.relative_to(ROOT).parts[0] != "settings"
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


DOORS = ("rest_compat", "resolvers", "schema")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import the module runs, at its top or inside a function (an import in a function
    still ties the modules together, it only defers it); not those under TYPE_CHECKING, which
    never run."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The calcgraph modules `path` imports: `from a.b import c` is module `a.b.c` when that is
    a module, else `a.b`; and the packages above them, whose `__init__` runs first, except the
    importing module's own packages (already running when it runs)."""
    names: set[str] = set()
    for node in imports_of(path):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif node.module is not None and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                names.add(full if full in modules else node.module)
    own = module_name(path)
    parents = {name.rsplit(".", depth)[0] for name in names for depth in range(1, name.count("."))}
    parents -= {own.rsplit(".", depth)[0] for depth in range(0, own.count(".") + 1)}
    return {name for name in names | parents if name in modules}


@functools.cache
def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in ROOT.rglob("*.py")}
    modules = set(paths)
    return {name: imported_modules(path, modules) - {name} for name, path in sorted(paths.items())}


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                connect(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = set()
            while True:
                other = stack.pop()
                component.add(other)
                if other == module:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for module in graph:
        if module not in index:
            connect(module)
    return found


def test_calcgraph_has_no_import_circle() -> None:
    found = [sorted(circle) for circle in circles(import_graph())]
    assert found == [], f"modules that import each other (through a function, too): {found}"


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [frozenset({"a", "b", "c"})]


def door_modules() -> list[Path]:
    return sorted(path for door in DOORS for path in (ROOT / door).rglob("*.py"))


@pytest.mark.parametrize("path", door_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_doors_read_the_application_through_their_accessor(path: Path) -> None:
    """The doors read the application's state through their one typed accessor (which modules
    they may import is the layers contract's, `lint-imports` in `make lint`)."""
    assert "app.state" not in path.read_text(), f"{path.name} reads app.state untyped"


def test_no_module_is_over_400_lines() -> None:
    """Issue 30: a module that outgrows 400 lines is split where its parts separate."""
    long = {
        str(path.relative_to(ROOT)): count
        for path in ROOT.rglob("*.py")
        if (count := len(path.read_text().splitlines())) > 400
    }
    assert not long, long
