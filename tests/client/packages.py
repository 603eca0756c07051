"""Small packages the client tests publish, written as directories like an author's."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

from tests.client.conftest import unique

MANIFEST = """\
kind: package
version: 1
package:
  name: {name}
  version: 1.0.0
  versioning_strategy: auto
functions:
  scale:
    handler: tools:scale
    inputs:
      length: {{type: Length, required: true}}
      factor: {{type: Float, required: true}}
    outputs:
      scaled: {{type: Length}}
  boom:
    handler: tools:boom
    inputs:
      x: {{type: Float, required: true}}
    outputs:
      y: {{type: Float}}
  untyped:
    handler: tools:untyped
  slow:
    handler: tools:slow
    inputs:
      seconds: {{type: Float, required: true}}
    outputs:
      seconds: {{type: Float}}
"""

TOOLS = textwrap.dedent(
    """
    import time

    def scale(length, factor):
        return {"scaled": length * factor}

    def boom(x):
        raise ValueError(f"bad x: {x}")

    def untyped(**inputs):
        return {"echo": inputs}

    def slow(seconds):
        time.sleep(seconds)
        return {"seconds": seconds}
    """
)


def tools_package(tmp_path: Path) -> tuple[str, Path]:
    """A package `tools-<hex>`: `scale` (typed), `boom` (always fails), `untyped`, `slow`."""
    name = unique("tools")
    directory = tmp_path / name
    directory.mkdir()
    (directory / "calcgraph.yaml").write_text(MANIFEST.format(name=name))
    (directory / "tools.py").write_text(TOOLS)
    return name, directory


def git_repository(tmp_path: Path) -> tuple[str, str]:
    """A git repository holding a tools package at its root, tagged v1.0.0: (name, file URL)."""
    name, directory = tools_package(tmp_path)

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-c", "user.name=T", "-c", "user.email=t@example.test", *args],
            cwd=directory,
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "tools 1.0.0")
    git("tag", "v1.0.0")
    return name, directory.as_uri()
