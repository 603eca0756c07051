"""Where pint's parsed unit definitions are kept between starts (`calcgraph.domain.types.values`
builds the registry): a folder of this user's under the temporary directory, as the code cache.

Building the unit registry parses pint's definition files, about half a second of CPU at the
first quantity a server converts, and inside `calcgraph demo`'s start; from the cache it is a
twentieth of a second. pint stores the parsed definitions pickled, so the folder must be this
user's alone: made 0700, and not used when it is a link or belongs to anyone else.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path

from calcgraph.domain.types.values import cache_unit_definitions, unit_registry

log = logging.getLogger("calcgraph")


def private_folder(root: Path) -> Path | None:
    """`root`, created when missing, if it is a real directory that only this user can reach;
    else None (logged)."""
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = root.lstat()
    except OSError as exc:
        log.warning("unit definitions are not cached: %s", exc)
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        log.warning("unit definitions are not cached: %s is not a folder of this user's", root)
        return None
    if stat.S_IMODE(found.st_mode) & 0o077:
        try:
            os.chmod(root, 0o700)
        except OSError as exc:
            log.warning("unit definitions are not cached: %s", exc)
            return None
    return root


def cache_units(root: Path | None = None) -> None:
    """Cache the unit definitions under `root` (default: the temporary directory), for the
    registry this process builds next."""
    folder = private_folder(root or Path(tempfile.gettempdir()) / f"calcgraph-units-{os.getuid()}")
    if folder is not None:
        cache_unit_definitions(folder)


def build_unit_registry() -> None:
    """Build the process's unit registry now (from the cache): `calcgraph demo` does it in a
    thread while its platform starts."""
    cache_units()
    unit_registry()
