"""Installing a submission's requirements with pip, binary wheels only, in a clean environment."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from calcgraph.builds.logs import BuildLog


class BuildFailed(Exception):
    """The build could not produce an artifact or image (pip, docker, time limit)."""


class BuildTimedOut(BuildFailed):
    pass


@dataclass(frozen=True)
class PipOptions:
    index_url: str | None = None
    find_links: tuple[str, ...] = ()
    no_index: bool = False

    def arguments(self) -> list[str]:
        args: list[str] = []
        if self.no_index:
            args.append("--no-index")
        if self.index_url:
            args += ["--index-url", self.index_url]
        for location in self.find_links:
            args += ["--find-links", location]
        return args


class Deadline:
    """The one time budget of a build (spec: 300 s), shared by each step."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        left = self._end - time.monotonic()
        if left <= 0:
            raise BuildTimedOut(f"the build did not finish within {self.seconds:g} s")
        return left


def pip_install(
    requirements: Sequence[str],
    target: Path,
    options: PipOptions,
    deadline: Deadline,
    log: BuildLog,
) -> None:
    """`pip install --target` with `--only-binary :all:`: no sdist runs its setup code here."""
    target.mkdir(parents=True, exist_ok=True)
    if not requirements:
        log.write("no requirements: nothing to install")
        return
    with tempfile.TemporaryDirectory(prefix="calcgraph-pip-") as home:
        requirements_file = Path(home) / "requirements.txt"
        requirements_file.write_text("".join(f"{r}\n" for r in requirements), encoding="utf-8")
        command = [
            sys.executable, "-m", "pip", "install",
            "--target", str(target),
            "--only-binary", ":all:",
            "--no-compile",  # byte-code carries timestamps: the artifact stays content-addressed
            "--no-input", "--disable-pip-version-check", "--no-cache-dir", "--isolated",
            *options.arguments(),
            "--requirement", str(requirements_file),
        ]  # fmt: skip
        log.write("$ " + " ".join(command))
        # No secret reaches the build: pip sees a fresh HOME and none of our variables.
        env = {"PATH": os.defpath, "HOME": home, "LANG": "C.UTF-8"}
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=env,
                cwd=home,
                timeout=deadline.remaining(),
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BuildTimedOut(
                f"pip did not finish within the build timeout of {deadline.seconds:g} s"
            ) from exc
        log.write(done.stdout)
        if done.stderr:
            log.write(done.stderr)
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-3:]
            raise BuildFailed(
                "installing the requirements failed (binary wheels only): " + " | ".join(tail)
            )
