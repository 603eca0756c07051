"""What a git deploy may ask for, checked before git runs: the URL (only the schemes the
operator allows, local sources only inside the operator's roots, no transport helpers or
option-looking URLs) and the ref name; and credentials redacted from what is shown.
`git.py` fetches what these let through."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from pathlib import Path
from urllib.parse import unquote, urlsplit

from calcgraph.domain.errors import FieldError, ValidationError

_HELPER_SYNTAX = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
_BAD_REF = re.compile(r"(\.\.|@\{|[\x00-\x20\x7f~^:?*\[\\])")
_CREDENTIALS = re.compile(r"(https?://)[^/@\s]+@")


def redact(text: str) -> str:
    return _CREDENTIALS.sub(r"\1***@", text)


def check_git_url(
    git_url: object,
    allowed_schemes: Collection[str] = ("https",),
    local_roots: Collection[Path] = (),
) -> str:
    """The URL git should fetch; ValidationError if refused.

    A local source (`file://` URL or absolute path) is accepted only when it resolves inside
    one of `local_roots`, and is then handed to git as the file URL of its resolved path, so
    git reads exactly the directory that was checked. Refusals never depend on what exists.
    """

    def refuse(msg: str) -> ValidationError:
        return ValidationError("git_url is invalid", [FieldError(("git_url",), msg)])

    if not isinstance(git_url, str) or not git_url.strip():
        raise refuse("must be a non-empty string")
    url = git_url.strip()
    remote = sorted(s for s in allowed_schemes if s != "file")
    allowed = ", ".join(f"{s}://" for s in remote)
    if url.startswith("-"):
        raise refuse("must not start with '-'")
    if any(ord(c) < 0x21 or c == "\x7f" for c in url):
        raise refuse("must not contain spaces or control characters")
    if _HELPER_SYNTAX.match(url):
        raise refuse(f"transport helpers ('<name>::') are not allowed; use {allowed}")
    if url.startswith("/"):
        return _local_source(url, local_roots, refuse, allowed)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if not scheme or "://" not in url:
        raise refuse(f"must be a URL with one of the schemes {allowed}")
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise refuse("a file URL must be file:///absolute/path")
        return _local_source(unquote(parts.path), local_roots, refuse, allowed)
    if scheme not in remote:
        raise refuse(f"scheme {scheme}:// is not allowed; use {allowed}")
    if not parts.hostname:
        raise refuse("must name a host")
    return url


def _local_source(
    path: str,
    roots: Collection[Path],
    refuse: Callable[[str], ValidationError],
    allowed: str,
) -> str:
    """The file URL of `path` resolved, when that lies inside a local root."""
    if not roots:
        raise refuse(f"local repositories are not allowed on this server; use {allowed}")
    if "\x00" in path:
        raise refuse("must not contain NUL")
    # resolve() follows symlinks and `..`; strict=False resolves as far as the disk goes, so
    # a missing path gets the same answer as a present one outside the roots.
    resolved = Path(os.path.normpath(path)).resolve()
    for root in roots:
        if resolved.is_relative_to(Path(root).resolve()):
            return resolved.as_uri()
    raise refuse(
        "local repositories are allowed only inside the folders this server's operator "
        f"configured (CALCGRAPH_GIT_LOCAL_ROOTS); use {allowed}"
    )


def check_ref(ref: object) -> str:
    """A tag, branch or commit SHA as git accepts it; ValidationError otherwise."""

    def refuse(msg: str) -> ValidationError:
        return ValidationError("ref is invalid", [FieldError(("ref",), msg)])

    if not isinstance(ref, str) or not ref.strip():
        raise refuse("must be a tag, branch or commit SHA")
    ref = ref.strip()
    if len(ref) > 255:
        raise refuse("must be at most 255 characters")
    if ref.startswith(("-", "/")) or ref.endswith(("/", ".", ".lock")) or _BAD_REF.search(ref):
        raise refuse(f"{ref!r} is not a valid git ref name")
    return ref
