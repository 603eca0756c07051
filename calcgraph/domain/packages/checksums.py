"""SHA-256 code checksums of functions (spec: FunctionVersion.code_checksum).

What "the function's code" is: the handler's module file plus every module of the same
package that it imports, transitively (parent `__init__.py` files included, since importing
`a.b` runs `a/__init__.py`). Hashing the module alone would miss a fix in a helper module
the function calls: the auto rule would then keep the old immutable version, running the
old helper, for ever. Hashing every file of the package would bump every function on any
change and make `unchanged` meaningless. The import closure is the honest middle.

Imports are found statically with `ast`: every `import`/`from ... import` statement in the
file, wherever it stands (inside functions and `try` blocks too). Modules loaded
dynamically (`importlib`) and data files the code reads are not covered: declare them by a
static import, or accept that changing them alone does not bump the version.

Line endings are normalised (CRLF and CR to LF) before hashing, so a checkout on Windows
gives the same checksum. When the closure is the module alone, the checksum is exactly the
SHA-256 of its normalised source, which an author can reproduce with `sha256sum`. Otherwise
it is the SHA-256 of the lines `<path> <sha256 of file>` of every file, sorted by path.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable, Mapping

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.packages.manifest import Manifest

Source = bytes | str
Files = Mapping[str, Source]


def normalise_line_endings(source: Source) -> bytes:
    data = source.encode() if isinstance(source, str) else source
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def source_checksum(source: Source) -> str:
    """SHA-256 (lowercase hex) of a source text with normalised line endings."""
    return hashlib.sha256(normalise_line_endings(source)).hexdigest()


def normalise_path(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def module_path(module: str, paths: Iterable[str]) -> str | None:
    """The file of a dotted module inside the package: `a/b/__init__.py` or `a/b.py`, in the
    order Python's path finder prefers them."""
    known = set(paths)
    base = module.replace(".", "/")
    for candidate in (f"{base}/__init__.py", f"{base}.py"):
        if candidate in known:
            return candidate
    return None


def _module_of(path: str) -> tuple[str, bool]:
    """Dotted name of a file, and whether it is a package (`__init__.py`)."""
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _imported_modules(tree: ast.AST, path: str) -> set[str]:
    """Every module name an import statement of the file may load (absolute names)."""
    own, is_package = _module_of(path)
    package_parts = own.split(".") if is_package else own.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.update(_with_parents(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                keep = len(package_parts) - (node.level - 1)
                if keep < 0:
                    continue  # beyond the top of the package: it fails at run time anyway
                base_parts = package_parts[:keep] + (node.module.split(".") if node.module else [])
            else:
                base_parts = node.module.split(".") if node.module else []
            if not base_parts:
                base = ""
            else:
                base = ".".join(base_parts)
                names.update(_with_parents(base))
            for alias in node.names:
                if alias.name != "*":
                    names.add(f"{base}.{alias.name}" if base else alias.name)
    return names


class CodeError(ValueError):
    """A file of the package that cannot be read as Python; `path` names it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _parse(path: str, source: Source) -> ast.AST:
    try:
        return ast.parse(normalise_line_endings(source), filename=path)
    except SyntaxError as exc:
        raise CodeError(path, f"line {exc.lineno}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise CodeError(path, f"cannot be parsed as Python: {type(exc).__name__}") from None


def code_files(module: str, files: Files) -> tuple[str, ...]:
    """The files that make a handler module's code, sorted: the import closure.

    Raises KeyError when the module has no file in the package, CodeError when a file of
    the closure is not valid Python.
    """
    by_path = {normalise_path(p): s for p, s in files.items()}
    start = module_path(module, by_path)
    if start is None:
        raise KeyError(module)
    pending = [p for p in (module_path(m, by_path) for m in _with_parents(module)) if p]
    seen: set[str] = set()
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imported_modules(_parse(path, by_path[path]), path):
            found = module_path(name, by_path)
            if found is not None and found not in seen:
                pending.append(found)
    return tuple(sorted(seen))


def files_checksum(paths: Iterable[str], files: Files) -> str:
    """The checksum of a set of files (see the module docstring for the two forms)."""
    by_path = {normalise_path(p): s for p, s in files.items()}
    chosen = sorted(set(paths))
    if len(chosen) == 1:
        return source_checksum(by_path[chosen[0]])
    lines = "".join(f"{path} {source_checksum(by_path[path])}\n" for path in chosen)
    return hashlib.sha256(lines.encode()).hexdigest()


def function_checksum(module: str, files: Files) -> str:
    return files_checksum(code_files(module, files), files)


def function_checksums(manifest: Manifest, files: Files) -> dict[str, str]:
    """Checksum of every function of a manifest over the package files (path to source).

    Refuses with one ValidationError: a handler module missing from the files, a file that
    is not valid Python, a declared `checksum` that differs from the code.
    """
    checksums: dict[str, str] = {}
    problems: list[FieldError] = []
    reported: set[str] = set()
    for name, spec in manifest.functions.items():
        try:
            checksum = function_checksum(spec.module, files)
        except KeyError:
            wanted = spec.module.replace(".", "/")
            problems.append(
                FieldError(
                    ("functions", name, "handler"),
                    f"module {spec.module!r} is not in the package: no {wanted}.py "
                    f"or {wanted}/__init__.py",
                )
            )
            continue
        except CodeError as exc:
            if exc.path not in reported:
                reported.add(exc.path)
                problems.append(FieldError(("files", exc.path), exc.message))
            continue
        if spec.checksum is not None and spec.checksum != checksum:
            problems.append(
                FieldError(
                    ("functions", name, "checksum"),
                    f"declared sha256:{spec.checksum} but the code gives sha256:{checksum}",
                )
            )
        checksums[name] = checksum
    if problems:
        raise ValidationError("package code is invalid", problems)
    return checksums
