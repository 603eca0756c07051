"""The built-in scanner: installed distributions matched against an OSV advisory database.

An OSV dump is one JSON document per advisory. The PyPI dump of osv.dev is published as
`PyPI/all.zip` in the public `osv-vulnerabilities` bucket; unpack it anywhere (or leave it zipped)
and set `CALCGRAPH_ADVISORY_DB_PATH` to that directory or file. The database is read once, at the
first scan, and kept for the life of the process.
"""

from __future__ import annotations

import json
import logging
import threading
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calcgraph.builds.distributions import installed_distributions
from calcgraph.builds.report import ScanError, ScanReport
from calcgraph.domain.builds.advisories import AdvisoryIndex, InstalledDistribution

log = logging.getLogger(__name__)

NO_DATABASE_NOTE = (
    "no advisory database is configured (CALCGRAPH_ADVISORY_DB_PATH): nothing was matched"
)


@dataclass(frozen=True)
class LoadedDatabase:
    index: AdvisoryIndex
    documents: int
    skipped: tuple[str, ...]
    """Documents that could not be read as JSON advisories, named for the build log."""


def load_advisories(path: Path) -> LoadedDatabase:
    """Index every advisory under `path`. Unreadable documents are skipped and named, so that
    one damaged file in a dump of tens of thousands does not stop every build."""
    if not path.exists():
        raise ScanError(f"advisory database {path} does not exist")
    index = AdvisoryIndex()
    documents = 0
    skipped: list[str] = []
    for name, content in _documents(path):
        documents += 1
        try:
            parsed: Any = json.loads(content)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError both are ValueErrors
            skipped.append(name)
            continue
        # An advisory file holds one record; a few tools write a list of them.
        records = parsed if isinstance(parsed, list) else [parsed]
        if not all(isinstance(record, dict) for record in records):
            skipped.append(name)
            continue
        for record in records:
            index.add(record)
    if skipped:
        log.warning("advisory database %s: %d unreadable documents skipped", path, len(skipped))
    return LoadedDatabase(index, documents, tuple(skipped))


def _documents(path: Path) -> Iterator[tuple[str, bytes]]:
    if path.is_dir():
        for file in sorted(path.rglob("*.json")):
            if file.is_file():
                yield file.relative_to(path).as_posix(), file.read_bytes()
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for member in archive.infolist():
                if not member.is_dir() and member.filename.endswith(".json"):
                    yield member.filename, archive.read(member)
    else:
        yield path.name, path.read_bytes()


class OsvScanner:
    """Matches the artifact's distributions against the advisories under `advisory_path`."""

    def __init__(self, advisory_path: Path | None) -> None:
        self.advisory_path = advisory_path
        self._loaded: LoadedDatabase | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"osv ({self.advisory_path})" if self.advisory_path else "osv (no database)"

    def database(self) -> LoadedDatabase:
        """The indexed database, read on first use; concurrent builds wait for one read."""
        with self._lock:
            if self._loaded is None:
                if self.advisory_path is None:
                    log.warning(NO_DATABASE_NOTE)
                    self._loaded = LoadedDatabase(AdvisoryIndex(), 0, ())
                else:
                    self._loaded = load_advisories(self.advisory_path)
            return self._loaded

    def scan(
        self,
        target: Path | str,
        distributions: Sequence[InstalledDistribution] | None = None,
    ) -> ScanReport:
        if distributions is None:
            if not isinstance(target, Path):
                raise ScanError(
                    f"the OSV scanner reads an artifact directory, not an image ({target}); "
                    "pass the installed distributions"
                )
            try:
                distributions = installed_distributions(target)
            except FileNotFoundError as exc:
                raise ScanError(str(exc)) from exc
        loaded = self.database()
        notes: list[str] = []
        if self.advisory_path is None:
            notes.append(NO_DATABASE_NOTE)
        if loaded.skipped:
            notes.append(f"{len(loaded.skipped)} unreadable advisory documents were skipped")
        return ScanReport(
            scanner=f"{self.name}: {loaded.index.size} PyPI advisories",
            distributions=tuple(distributions),
            findings=tuple(loaded.index.match(distributions)),
            notes=tuple(notes),
        )
