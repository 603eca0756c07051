"""The files of a published package, as a sandbox will stage them. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.packages.checksums import normalise_path

_MAX_FILES = 5000


def clean_files(files: Mapping[str, str | bytes]) -> dict[str, bytes]:
    """Paths a sandbox can stage safely: relative, no `..`, no empty segment."""
    cleaned: dict[str, bytes] = {}
    problems: list[FieldError] = []
    if len(files) > _MAX_FILES:
        problems.append(FieldError(("files",), f"at most {_MAX_FILES} files"))
    for raw, content in files.items():
        path = normalise_path(raw)
        parts = path.split("/")
        if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
            problems.append(FieldError(("files", raw), "must be a relative path without '..'"))
            continue
        cleaned[path] = content.encode() if isinstance(content, str) else content
    if problems:
        raise ValidationError("package files are invalid", problems)
    return cleaned
