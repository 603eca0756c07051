"""What the 503 page of a missing web app says: how to get the files, for the way this calcgraph
was installed (a source checkout, pipx, or pip from a directory, a Git URL, an archive or an
index). Every wheel and sdist calcgraph's own build makes carries the built app."""

from __future__ import annotations

import json
import shlex
import sys
from html import escape
from importlib import metadata
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


def _origin() -> str | None:
    """What pip installed calcgraph from (PEP 610's direct_url.json), as pip takes it again."""
    try:
        text = metadata.distribution("calcgraph").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    record = json.loads(text)
    url = str(record.get("url", ""))
    vcs = record.get("vcs_info")
    if isinstance(vcs, dict):
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        return f"{vcs.get('vcs', 'git')}+{url}" + (f"@{commit}" if commit else "")
    return url.removeprefix("file://") or None


def how_to_get_them() -> str:
    """One sentence of HTML with the command to run."""
    checkout = PACKAGE.parent
    if (checkout / "web" / "package.json").is_file():
        return (
            f"This is a source checkout: build them with <code>make install</code> in "
            f"<code>{escape(str(checkout))}</code> (or <code>python buildsys/webbuild.py web"
            "</code> there)."
        )
    if "pipx" in Path(sys.prefix).parts:
        return (
            "calcgraph was installed with pipx: <code>pipx reinstall calcgraph</code> builds "
            "it again with its web app."
        )
    source = _origin() or "calcgraph"
    command = (
        f"{shlex.quote(sys.executable)} -m pip install --force-reinstall {shlex.quote(source)}"
    )
    return (
        "calcgraph was installed without them: reinstall it from its source, whose build "
        f"builds the web app (Node &gt;= 22.15 or the pinned one from PyPI): "
        f"<code>{escape(command)}</code>."
    )


def page() -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>calcgraph</title>'
        "</head><body><h1>The web app is not built</h1><p>This installation has no built web "
        f"files (<code>{escape(str(PACKAGE / 'webui' / 'dist'))}</code>). "
        f"{how_to_get_them()}</p></body></html>"
    )
