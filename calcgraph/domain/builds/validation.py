"""Validation of code submitted to `POST /functions`, before anything is built.

Every rule runs and every violation is reported in one `ValidationError`, so an author fixes a
submission in one round trip. Each `FieldError` names its rule (`rule <id>: ...`) and its place:
`("body", "code", "line", n)` for the code, `("body", "requirements", i)` for a requirement,
`("body", "code")`, `("body", "handler")` or `("body", "requirements")` for the whole field.

Rule ids: code-size, code-encoding, syntax, blacklisted-import, eval-call, evasion, handler,
dependency-count, requirement-syntax, requirement-source, requirement-duplicate.
"""

from __future__ import annotations

import ast
import hashlib
import keyword
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import Requirement

from calcgraph.domain.builds.code_rules import lint_module
from calcgraph.domain.builds.limits import CODE_SIZE_LIMIT_BYTES, DEPENDENCY_LIMIT
from calcgraph.domain.builds.requirements import check_requirements
from calcgraph.domain.errors import FieldError, ValidationError

HANDLER_MODULE = "main"


@dataclass(frozen=True)
class SubmissionLimits:
    """Limits a submission must stay below; the service fills them from the settings."""

    code_size_limit_bytes: int = CODE_SIZE_LIMIT_BYTES
    dependency_limit: int = DEPENDENCY_LIMIT


@dataclass(frozen=True)
class ValidatedSubmission:
    """A submission that passed every rule, in the form the build needs."""

    source: str
    code_checksum: str
    """SHA-256 of the UTF-8 code, as the FunctionVersion record keeps it."""
    size_bytes: int
    handler_module: str
    handler_callable: str
    requirements: tuple[Requirement, ...]

    @property
    def requirement_lines(self) -> tuple[str, ...]:
        """The requirements in packaging's normal form, one per line of a requirements file."""
        return tuple(str(requirement) for requirement in self.requirements)


def validate_submission(
    code: str | bytes,
    requirements: Sequence[str],
    handler: str,
    limits: SubmissionLimits = SubmissionLimits(),  # frozen, so sharing the default is safe
) -> ValidatedSubmission:
    """Check a submission against every rule; raise one `ValidationError` listing all refusals."""
    errors: list[FieldError] = []
    source, raw, code_errors = _decode(code, limits.code_size_limit_bytes)
    errors.extend(code_errors)

    tree = _parse(source) if source is not None else None
    if isinstance(tree, FieldError):
        errors.append(tree)
        tree = None
    if tree is not None:
        errors.extend(
            FieldError(("body", "code", "line", v.line), v.message) for v in lint_module(tree)
        )

    callable_name, handler_error = _check_handler(handler, tree)
    if handler_error is not None:
        errors.append(handler_error)

    checked = check_requirements(requirements, limits.dependency_limit)
    errors.extend(checked.errors)

    if errors or source is None or callable_name is None:
        raise ValidationError(_summary(errors), errors)
    return ValidatedSubmission(
        source=source,
        code_checksum=hashlib.sha256(raw).hexdigest(),
        size_bytes=len(raw),
        handler_module=HANDLER_MODULE,
        handler_callable=callable_name,
        requirements=checked.requirements,
    )


def _decode(code: str | bytes, limit: int) -> tuple[str | None, bytes, list[FieldError]]:
    """The code as text and as UTF-8 bytes; no text when it is too large or not UTF-8."""
    if isinstance(code, str):
        # surrogatepass: a JSON string may carry a lone surrogate, which is not UTF-8 text; it
        # must be measured and refused, not crash the encoder.
        raw = code.encode("utf-8", "surrogatepass")
    else:
        raw = bytes(code)
    if len(raw) >= limit:
        # Oversized code is not parsed: the point of the limit is not to spend work on it.
        message = (
            f"rule code-size: code is {len(raw)} bytes; it must be below {limit} bytes (1 MB)"
            if limit == CODE_SIZE_LIMIT_BYTES
            else f"rule code-size: code is {len(raw)} bytes; it must be below {limit} bytes"
        )
        return None, raw, [FieldError(("body", "code"), message)]
    try:
        # A byte-order mark is tolerated, as Python itself tolerates it in a source file.
        source = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        message = f"rule code-encoding: code is not UTF-8 text (byte {exc.start}) on line {line}"
        return None, raw, [FieldError(("body", "code", "line", line), message)]
    return source, raw, []


def _parse(source: str) -> ast.Module | FieldError:
    """The syntax tree, or the syntax refusal with its line.

    The tree is also compiled, without running anything, because some errors (`return` outside a
    function, `nonlocal` at module level) are only found by the compiler, and the author should
    hear of them now rather than at the first call.
    """
    try:
        # Invalid escape sequences and the like warn; warnings are not refusals, and a test run
        # that turns warnings into errors must not turn them into crashes either. The filter
        # is process-wide while it lasts; losing another thread's warning then is harmless.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename="main.py", mode="exec")
            compile(tree, "main.py", "exec", dont_inherit=True)
    except SyntaxError as exc:
        # A NUL character is refused before the parser knows any line (SyntaxError without a
        # line number on 3.11, ValueError on some versions): find it ourselves.
        line = exc.lineno or _nul_line(source)
        reason = exc.msg or "invalid syntax"
        return FieldError(("body", "code", "line", line), f"rule syntax: {reason} on line {line}")
    except (ValueError, OverflowError) as exc:
        line = _nul_line(source)
        return FieldError(("body", "code", "line", line), f"rule syntax: {exc} on line {line}")
    except (RecursionError, MemoryError):
        return FieldError(
            ("body", "code", "line", 1), "rule syntax: code is nested too deeply on line 1"
        )
    return tree


def _nul_line(source: str) -> int:
    return source.count("\n", 0, source.find("\0")) + 1 if "\0" in source else 1


def _check_handler(handler: str, tree: ast.Module | None) -> tuple[str | None, FieldError | None]:
    """The handler's callable name; refused unless it is `main:<name>` bound at top level."""
    module, _, name = handler.partition(":")
    if module != HANDLER_MODULE or not name.isidentifier() or keyword.iskeyword(name):
        return None, FieldError(
            ("body", "handler"),
            f"rule handler: {handler[:80]!r} must be 'main:<callable>', "
            "naming a function of the submitted module main",
        )
    if tree is None:
        # The code did not parse; that refusal already says everything useful.
        return name, None
    bindings = _top_level_bindings(tree)
    if name not in bindings:
        return name, FieldError(
            ("body", "handler"),
            f"rule handler: module main defines no top-level {name!r} "
            "(a def, a class, an assignment or an import)",
        )
    if bindings[name] == "async":
        return name, FieldError(
            ("body", "handler"),
            f"rule handler: {name!r} is an async function; handlers are called synchronously",
        )
    return name, None


def _top_level_bindings(tree: ast.Module) -> dict[str, str]:
    """Names bound at module level, including inside if/try/with blocks but not in functions."""
    bound: dict[str, str] = {}
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, ast.AsyncFunctionDef):
            bound.setdefault(stmt.name, "async")
        elif isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            bound[stmt.name] = "callable"
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        bound[node.id] = "value"
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                bound[alias.asname or alias.name.split(".")[0]] = "value"
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(stmt, field, ()):
                    if isinstance(child, ast.stmt):
                        pending.append(child)
                    else:  # an except handler or a match case holds statements of its own
                        pending.extend(getattr(child, "body", ()))
    return bound


def _summary(errors: Sequence[FieldError]) -> str:
    first = errors[0].msg
    more = len(errors) - 1
    tail = f" (and {more} more violation{'s' if more > 1 else ''})" if more else ""
    return f"submitted function refused: {first}{tail}"
