"""The files of a published package, as a sandbox will stage them. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from calcgraph.domain.errors import FieldError, ValidationError
from calcgraph.domain.packages.checksums import normalise_path

_MAX_FILES = 5000
_MAX_COMPONENT_BYTES = 255
"""A file name's limit on Linux (NAME_MAX): a longer one cannot be staged (contract 8b)."""


def clean_files(files: Mapping[str, str | bytes]) -> dict[str, bytes]:
    """Paths a sandbox can stage safely: relative, no `..`, no empty segment, no NUL, and
    each file once: `./m.py` and `m.py` name one file, and keeping either silently would run
    a file that nobody reviewed under the other's name. Each path component holds at most 255
    bytes of UTF-8, and no file is also a folder (`m.py` beside `m.py/x.py`): neither could be
    staged, and every run would fail (contract section 8b)."""
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
        long = next((p for p in parts if _bytes(p) > _MAX_COMPONENT_BYTES), None)
        if long is not None:
            problems.append(
                FieldError(
                    ("files", raw),
                    f"a component of {raw[:80]!r}... is "
                    f"{_bytes(long)} bytes; at most "
                    f"{_MAX_COMPONENT_BYTES} per file or folder name",
                )
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
    folders = {
        "/".join(path.split("/")[:i]) for path in cleaned for i in range(1, path.count("/") + 1)
    }
    for path in sorted(folders & cleaned.keys()):
        problems.append(
            FieldError(
                ("files", sent_as[path]),
                f"{path!r} is a file and also a folder of other files; rename one of them",
            )
        )
    if problems:
        shown = "; ".join(problem.msg for problem in problems[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ValidationError(f"package files are invalid: {shown}{more}", problems)
    return cleaned


def _bytes(component: str) -> int:
    return len(component.encode("utf-8", "surrogatepass"))
