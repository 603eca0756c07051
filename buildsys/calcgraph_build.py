"""calcgraph's build backend: setuptools', plus the web app (buildsys/webbuild.py).

Building a wheel or an sdist builds `web/` into `calcgraph/webui/dist` first unless the built
files are newer than every source; an sdist carries them, so a wheel built from it needs no
Node. An editable install builds nothing (`make install` builds the app itself). The frontend
is asked for the pinned Node only when the app must be built and the machine has none it
supports.
"""

from __future__ import annotations

from typing import Any

import webbuild
from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the rest of the backend is setuptools')
from setuptools.command.build_py import build_py as _build_py
from setuptools.command.sdist import sdist as _sdist


def _build_web() -> None:
    try:
        webbuild.build_web()
    except webbuild.WebBuildError as error:
        raise SystemExit(f"calcgraph build: {error}") from None


class BuildPy(_build_py):  # type: ignore[misc]
    """build_py that builds the web app first (not for an editable install)."""

    def run(self) -> None:
        if not self.editable_mode:
            _build_web()
        super().run()


class Sdist(_sdist):  # type: ignore[misc]
    """sdist that carries the built web app."""

    def run(self) -> None:
        _build_web()
        super().run()


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_setuptools.get_requires_for_build_wheel(config_settings), *webbuild.needs_node()]


def get_requires_for_build_sdist(config_settings: dict[str, Any] | None = None) -> list[str]:
    return [*_setuptools.get_requires_for_build_sdist(config_settings), *webbuild.needs_node()]
