"""The `functions:` section of a manifest: handler, versioning fields and typed I/O ports.

Typed I/O rule: see `manifest.py`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from calcgraph.domain.functions.resources import (
    MAXIMA,
    MINIMA,
    PROFILES,
    RESOURCE_KEYS,
    resolved,
)
from calcgraph.domain.packages.manifest_package import STRATEGIES, Strategy
from calcgraph.domain.packages.manifest_reader import Loc, Problems, describe
from calcgraph.domain.types.expr import TypeExprError, from_json
from calcgraph.domain.workflows import retry as retry_rules
from calcgraph.domain.workflows.retry import RetryPolicy

_CHECKSUM = re.compile(r"^(?:sha256:)?([0-9a-fA-F]{64})$")
FUNCTION_KEYS = (
    "handler",
    "version",
    "checksum",
    "versioning",
    "changelog",
    "deprecated",
    "deprecated_message",
    "removal_version",
    "inputs",
    "outputs",
    "retry",
    "resources",
    "profile",
)


@dataclass(frozen=True)
class Port:
    name: str
    type: str
    """The type expression in canonical spelling (checked against the catalog)."""
    description: str | None = None
    required: bool = True
    """Inputs only; outputs are always produced."""


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    handler: str
    """`module.path:callable`, checked by `parse_handler`."""
    version: str | None = None
    checksum: str | None = None
    """Declared SHA-256 (bare lowercase hex); the deployment refuses code that differs."""
    versioning: Strategy | None = None
    """Per-function override of `package.versioning_strategy`."""
    changelog: str | Mapping[str, str] | None = None
    deprecated: bool = False
    deprecated_message: str | None = None
    removal_version: str | None = None
    inputs: tuple[Port, ...] | None = None
    outputs: tuple[Port, ...] | None = None
    retry: RetryPolicy | None = None
    """The default retry policy of its workflow nodes (contract section 10)."""
    resources: Mapping[str, Any] | None = None
    """Resolved per-function limits (`functions.resources`): `resources` or `profile`."""
    profile: str | None = None

    @property
    def module(self) -> str:
        return self.handler.partition(":")[0]

    @property
    def callable(self) -> str:
        return self.handler.partition(":")[2]

    @property
    def typed(self) -> bool:
        return self.inputs is not None and self.outputs is not None

    def inputs_schema(self) -> dict[str, Any] | None:
        """`FunctionVersion.inputs_schema`: port to {type, description, required}; None untyped."""
        if not self.typed or self.inputs is None:
            return None
        return {
            p.name: {"type": p.type, "description": p.description, "required": p.required}
            for p in self.inputs
        }

    def outputs_schema(self) -> dict[str, Any] | None:
        """`FunctionVersion.outputs_schema`: port to {type, description}; None untyped."""
        if not self.typed or self.outputs is None:
            return None
        return {p.name: {"type": p.type, "description": p.description} for p in self.outputs}

    def changelog_for(self, version: str) -> str | None:
        if isinstance(self.changelog, Mapping):
            return self.changelog.get(version)
        return self.changelog


def _ports_as_json(ports: tuple[Port, ...] | None) -> dict[str, Any] | None:
    """Ports in manifest form: only the keys that were given, so the result parses back."""
    if ports is None:
        return None
    result: dict[str, Any] = {}
    for port in ports:
        entry: dict[str, Any] = {"type": port.type}
        if port.description is not None:
            entry["description"] = port.description
        if not port.required:
            entry["required"] = False
        result[port.name] = entry
    return result


def function_as_json(spec: FunctionSpec) -> dict[str, Any]:
    result: dict[str, Any] = {"handler": spec.handler, "deprecated": spec.deprecated}
    optional = {
        "version": spec.version,
        "checksum": spec.checksum,
        "versioning": spec.versioning,
        "deprecated_message": spec.deprecated_message,
        "removal_version": spec.removal_version,
        "inputs": _ports_as_json(spec.inputs),
        "outputs": _ports_as_json(spec.outputs),
        "retry": None if spec.retry is None else spec.retry.as_dict(),
    }
    result.update({k: v for k, v in optional.items() if v is not None})
    if spec.profile is not None:
        result["profile"] = spec.profile
    elif spec.resources is not None:
        result["resources"] = dict(spec.resources)
    if spec.changelog is not None:
        changelog = spec.changelog
        result["changelog"] = changelog if isinstance(changelog, str) else dict(changelog)
    return result


def parse_handler(value: str) -> tuple[str, str] | str:
    """`module.path:callable` split in two, or the reason it is not a handler."""
    module, sep, name = value.partition(":")
    if not sep or ":" in name:
        return "must be '<module>:<callable>', e.g. 'beam:cantilever'"
    parts = module.split(".")
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in parts):
        return f"module {module!r} is not a dotted path of Python identifiers"
    if not name.isidentifier() or keyword.iskeyword(name):
        return f"callable {name!r} is not a Python identifier"
    return module, name


def _ports(p: Problems, value: object, loc: Loc, *, inputs: bool) -> tuple[Port, ...] | None:
    entries = p.entries(value, loc, what="port names")
    if not isinstance(value, Mapping):
        return None
    if not inputs and not value:
        p.add(loc, "a typed function needs at least one output port")
    ports: list[Port] = []
    optional = ("description", "required") if inputs else ("description",)
    for name, raw_port in entries:
        here = (*loc, name)
        if not name.isidentifier() or keyword.iskeyword(name):
            # The handler receives inputs as keyword arguments named after the ports.
            p.add(here, "a port name must be a Python identifier and not a keyword")
            continue
        raw = p.mapping(raw_port, here, required=("type",), optional=optional)
        if raw is None:
            continue
        type_text = None
        if "type" in raw:
            try:
                type_text = str(from_json(raw["type"]))
            except TypeExprError as exc:
                p.add((*here, "type"), exc.message)
            except RecursionError:
                p.add((*here, "type"), "type expression nests too deeply")
        description = None
        if "description" in raw:
            description = p.string(
                raw["description"], (*here, "description"), max_length=2000, allow_empty=True
            )
        required = True
        if "required" in raw:
            required = p.boolean(raw["required"], (*here, "required")) is not False
        if type_text is not None:
            ports.append(Port(name, type_text, description, required))
    return tuple(ports)


def _resources(p: Problems, value: object, loc: Loc) -> dict[str, float] | None:
    raw = p.mapping(value, loc, required=(), optional=RESOURCE_KEYS)
    if raw is None:
        return None
    found: dict[str, float] = {}
    for key in RESOURCE_KEYS:
        if key not in raw:
            continue
        here = (*loc, key)
        number = p.number(raw[key], here, minimum=MINIMA[key], maximum=MAXIMA[key])
        if number is None:
            continue
        if key == "memory_mb" and number != int(number):
            p.add(here, f"must be a whole number of megabytes, not {number!r}")
            continue
        found[key] = int(number) if key == "memory_mb" else float(number)
    if not raw:
        p.add(loc, f"names no limit; give one or more of {', '.join(RESOURCE_KEYS)}")
    return found


def _function_changelog(p: Problems, value: object, loc: Loc) -> str | Mapping[str, str] | None:
    return p.versioned_text(value, loc, max_length=4000)


def parse_function(p: Problems, name: str, value: object, loc: Loc) -> FunctionSpec | None:
    raw = p.mapping(value, loc, required=("handler",), optional=FUNCTION_KEYS[1:])
    if raw is None:
        return None
    handler = None
    if "handler" in raw:
        given = p.string(raw["handler"], (*loc, "handler"), max_length=300)
        if given is not None:
            split = parse_handler(given.strip())
            if isinstance(split, str):
                p.add((*loc, "handler"), split)
            else:
                handler = given.strip()
    version = p.version(raw["version"], (*loc, "version")) if "version" in raw else None
    checksum = None
    if "checksum" in raw:
        text = raw["checksum"]
        match = _CHECKSUM.match(text.strip()) if isinstance(text, str) else None
        if match is None:
            p.add((*loc, "checksum"), f"must be 'sha256:<64 hex digits>', not {describe(text)}")
        else:
            checksum = match.group(1).lower()
    versioning = None
    if "versioning" in raw:
        versioning = p.choice(raw["versioning"], (*loc, "versioning"), STRATEGIES)
    changelog = (
        _function_changelog(p, raw["changelog"], (*loc, "changelog"))
        if "changelog" in raw
        else None
    )
    deprecated = False
    if "deprecated" in raw:
        deprecated = p.boolean(raw["deprecated"], (*loc, "deprecated")) is True
    message = removal = None
    if "deprecated_message" in raw:
        message = p.string(raw["deprecated_message"], (*loc, "deprecated_message"))
    if "removal_version" in raw:
        removal = p.version(raw["removal_version"], (*loc, "removal_version"))
    for key in ("deprecated_message", "removal_version"):
        if key in raw and raw.get("deprecated") is not True:
            p.add((*loc, key), "applies only to a function with deprecated: true")
    inputs = _ports(p, raw["inputs"], (*loc, "inputs"), inputs=True) if "inputs" in raw else None
    outputs = (
        _ports(p, raw["outputs"], (*loc, "outputs"), inputs=False) if "outputs" in raw else None
    )
    if ("inputs" in raw) != ("outputs" in raw):
        missing = "outputs" if "inputs" in raw else "inputs"
        p.add(
            (*loc, missing),
            "is required with "
            + ("inputs" if missing == "outputs" else "outputs")
            + ": declare both blocks (typed function) or neither (untyped)",
        )
    retry = None
    if "retry" in raw:
        retry, reasons = retry_rules.parse(raw["retry"])
        for reason in reasons:
            p.add((*loc, "retry"), reason)
    declared = _resources(p, raw["resources"], (*loc, "resources")) if "resources" in raw else None
    profile = (
        p.choice(raw["profile"], (*loc, "profile"), tuple(PROFILES)) if "profile" in raw else None
    )
    if "resources" in raw and "profile" in raw:
        p.add((*loc, "profile"), "give resources or a profile, not both")
    if handler is None:
        return None
    return FunctionSpec(
        name=name,
        handler=handler,
        version=version,
        checksum=checksum,
        versioning=versioning,  # type: ignore[arg-type]
        changelog=changelog,
        deprecated=deprecated,
        deprecated_message=message,
        removal_version=removal,
        inputs=inputs,
        outputs=outputs,
        retry=retry,
        resources=resolved(declared, profile),
        profile=profile,
    )
