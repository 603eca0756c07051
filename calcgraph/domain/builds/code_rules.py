"""The import blacklist and its obvious evasions, checked on the syntax tree of submitted code.

This is a lint for fast feedback, not a security boundary: the sandbox is the boundary. Anything
computed at run time (a name assembled from pieces, an object reached through a library) escapes
a static check, so the rules aim at what a reader would recognise at a glance and keep false
positives rare enough that an honest author is not refused for ordinary code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# The specification's blacklist: `import os` and `import os.path` and `from os import x` alike.
BLACKLISTED_MODULES = frozenset({"os", "subprocess", "socket"})

# Modules that reach the same powers by another road, with the reason a refusal gives.
EVASION_MODULES: dict[str, str] = {
    "importlib": "dynamic import",
    "builtins": "builtins access",
    "ctypes": "native code",
    "_ctypes": "native code",
    "posix": "low-level twin of os",
    "nt": "low-level twin of os",
    "pty": "process spawning",
    "_posixsubprocess": "low-level twin of subprocess",
    "_socket": "low-level twin of socket",
}

# Names that are evasions wherever they appear: an alias (`f = exec`) is as bad as a call.
EVASION_NAMES: dict[str, str] = {
    "__import__": "dynamic import",
    "exec": "dynamic code",
    "compile": "dynamic code",
    "__builtins__": "builtins access",
}

# Attribute names whose only common use is walking out of the module's namespace.
EVASION_ATTRIBUTES: dict[str, str] = {
    "__builtins__": "builtins access",
    "__import__": "dynamic import",
    "__subclasses__": "class-hierarchy walk",
    "__globals__": "function globals access",
}

# String names that, handed to getattr() and friends or used as a key of globals()/vars(),
# spell one of the refused things.
_SUSPICIOUS_STRINGS = (
    BLACKLISTED_MODULES
    | EVASION_MODULES.keys()
    | EVASION_NAMES.keys()
    | EVASION_ATTRIBUTES.keys()
    | {"eval", "modules", "system", "popen"}
)
# Attributes that name the module table, or a refused module re-exported by an allowed one.
_MODULE_ATTRIBUTES = BLACKLISTED_MODULES | EVASION_MODULES.keys() | {"modules"}
_REFLECTION_CALLS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
_NAMESPACE_CALLS = frozenset({"globals", "vars", "locals"})


@dataclass(frozen=True, order=True)
class CodeViolation:
    """One refused construct: where it is, which rule refuses it, and what it was."""

    line: int
    rule: str
    detail: str

    @property
    def message(self) -> str:
        return f"rule {self.rule}: {self.detail} on line {self.line}"


def lint_module(tree: ast.Module) -> list[CodeViolation]:
    """Every violation in the module, sorted by line, each reported once."""
    found: set[CodeViolation] = set()
    # One pass over the tree: code near the size limit has most of a million nodes. ast.walk
    # visits a parent before its children, so a call is known before the name it calls, and it
    # is iterative, so deeply nested code that the parser accepted cannot overflow here.
    called: set[int] = set()
    sys_aliases = {"sys"}  # a bare `sys.modules` without an import still names the table
    imported: set[str] = set()
    module_lookups: list[ast.Attribute] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id == "eval" or node.id in EVASION_NAMES:
                found.update(_name_rule(node, id(node) in called))
        elif isinstance(node, ast.Attribute):
            if node.attr in _MODULE_ATTRIBUTES:
                module_lookups.append(node)
            elif node.attr in EVASION_ATTRIBUTES:
                found.update(_attribute_rule(node))
        elif isinstance(node, ast.Call):
            called.add(id(node.func))
            found.update(_reflection_rule(node))
        elif isinstance(node, ast.Subscript):
            found.update(_namespace_key_rule(node))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                text = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
                found.update(_module_rule(alias.name, text, node.lineno))
                if alias.name == "sys":
                    sys_aliases.add(alias.asname or "sys")
                imported.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            found.update(_import_from(node))
            imported.update(alias.asname or alias.name for alias in node.names)
    # Resolved after the walk, because an import (`import sys as s`) may be met after its use.
    for lookup in module_lookups:
        found.update(_module_lookup_rule(lookup, sys_aliases, imported))
    return sorted(found)


def _module_lookup_rule(
    node: ast.Attribute, sys_aliases: set[str], imported: set[str]
) -> list[CodeViolation]:
    """`sys.modules`, and a refused module reached through one that imports it: `pathlib.os`.

    Only attributes of imported names count, since `config.os` on an ordinary object is
    ordinary code.
    """
    base = node.value
    if not isinstance(base, ast.Name):
        return []
    if node.attr == "modules":
        if base.id not in sys_aliases:
            return []
        detail = f"'{base.id}.modules' (module table access)"
    elif base.id in imported:
        detail = f"'{base.id}.{node.attr}' (a refused module reached through another)"
    else:
        return []
    return [CodeViolation(node.lineno, "evasion", detail)]


def _module_rule(module: str, text: str, line: int) -> list[CodeViolation]:
    root = module.split(".")[0]
    if root in BLACKLISTED_MODULES:
        return [CodeViolation(line, "blacklisted-import", f"'{text}'")]
    if root in EVASION_MODULES:
        return [CodeViolation(line, "evasion", f"'{text}' ({EVASION_MODULES[root]})")]
    return []


def _import_from(node: ast.ImportFrom) -> list[CodeViolation]:
    names = ", ".join(
        alias.name + (f" as {alias.asname}" if alias.asname else "") for alias in node.names
    )
    if node.level:
        # A relative import cannot succeed in a single-module submission; nothing to refuse.
        return []
    module = node.module or ""
    text = f"from {module} import {names}"
    found = _module_rule(module, text, node.lineno)
    if not found and module == "sys" and any(a.name == "modules" for a in node.names):
        found.append(CodeViolation(node.lineno, "evasion", f"'{text}' (module table access)"))
    return found


def _name_rule(node: ast.Name, is_called: bool) -> list[CodeViolation]:
    if node.id == "eval":
        what = "call of eval" if is_called else "reference to eval (an alias is still eval)"
        return [CodeViolation(node.lineno, "eval-call", what)]
    if node.id in EVASION_NAMES:
        what = f"call of {node.id}" if is_called else f"reference to {node.id}"
        return [CodeViolation(node.lineno, "evasion", f"{what} ({EVASION_NAMES[node.id]})")]
    return []


def _attribute_rule(node: ast.Attribute) -> list[CodeViolation]:
    reason = EVASION_ATTRIBUTES[node.attr]
    return [CodeViolation(node.lineno, "evasion", f"attribute '{node.attr}' ({reason})")]


def _reflection_rule(node: ast.Call) -> list[CodeViolation]:
    func = node.func
    if not (isinstance(func, ast.Name) and func.id in _REFLECTION_CALLS and len(node.args) >= 2):
        return []
    name = node.args[1]
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        if name.value in _SUSPICIOUS_STRINGS:
            text = f'{func.id}(..., "{name.value}")'
            return [CodeViolation(node.lineno, "evasion", f"'{text}' (reflective access)")]
    return []


def _namespace_key_rule(node: ast.Subscript) -> list[CodeViolation]:
    value, key = node.value, node.slice
    if not (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in _NAMESPACE_CALLS
        and isinstance(key, ast.Constant)
        and isinstance(key.value, str)
        and key.value in _SUSPICIOUS_STRINGS
    ):
        return []
    text = f'{value.func.id}()["{key.value}"]'
    return [CodeViolation(node.lineno, "evasion", f"'{text}' (namespace lookup)")]
