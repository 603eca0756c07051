"""The files of a published package, as a sandbox will stage them. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.packages.checksums import normalise_path

_MAX_FILES = 5000


def clean_files(files: Mapping[str, str | bytes]) -> dict[str, bytes]:
    """Paths a sandbox can stage safely: relative, no `..`, no empty segment, no NUL, and
    each file once: `./m.py` and `m.py` name one file, and keeping either silently would run
    a file that nobody reviewed under the other's name."""
    cleaned: dict[str, bytes] = {}
    sent_as: dict[str, str] = {}
    problems: list[FieldError] = []
    if len(files) > _MAX_FILES:
        problems.append(FieldError(("files",), f"at most {_MAX_FILES} files"))
    for raw, content in files.items():
        if "\x00" in raw:
            problems.append(
                FieldError(("files", raw), f"the file path {raw!r} must not contain NUL")
            )
            continue
        path = normalise_path(raw)
        parts = path.split("/")
        if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
            problems.append(
                FieldError(("files", raw), f"{raw!r} must be a relative path without '..'")
            )
            continue
        if path in sent_as:
            problems.append(
                FieldError(
                    ("files", raw),
                    f"{sent_as[path]!r} and {raw!r} are the same file {path!r}; send it once",
                )
            )
            continue
        sent_as[path] = raw
        cleaned[path] = content.encode() if isinstance(content, str) else content
    if problems:
        shown = "; ".join(problem.msg for problem in problems[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ValidationError(f"package files are invalid: {shown}{more}", problems)
    return cleaned
