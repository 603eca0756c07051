"""Tiny wheels made on the spot, so builds install real distributions without any network."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from calcgraph.settings import Settings
from tests.execution.conftest import quick_sandbox

OSV_FIXTURE = Path(__file__).parent / "fixtures" / "osv"
# Invented names of the OSV fixture (CRITICAL and HIGH), and three clean ones.
VULNERABLE = ("calcgraph-fixture-vulnlib", "1.0.0")
HIGH = ("calcgraph-fixture-highlib", "1.2.0")
CLEAN = (
    ("calcgraph-fixture-clean-a", "1.0.0"),
    ("calcgraph-fixture-clean-b", "1.0.0"),
    ("calcgraph-fixture-clean-c", "1.0.0"),
)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def make_wheel(directory: Path, name: str, version: str) -> Path:
    """A pure-Python wheel whose module `<name with underscores>` has `VALUE = "<name>"`."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'VALUE = "{name} {version}"\n'.encode(),
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        ).encode(),
        f"{dist_info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: calcgraph-tests\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
    }
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in files.items())
    record += f"{dist_info}/RECORD,,\n"
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{dist_info}/RECORD", record)
    return wheel


def make_wheelhouse(directory: Path) -> Path:
    for name, version in (VULNERABLE, HIGH, *CLEAN):
        make_wheel(directory, name, version)
    return directory


def build_settings(base: Settings, root: Path, **overrides: object) -> Settings:
    """`base` with builds into `root`, local wheels only, and the OSV fixture as advisories."""
    values: dict[str, object] = {
        "sandbox": quick_sandbox(),
        "scanner": "osv",
        "advisory_db_path": OSV_FIXTURE,
        "build_dir": root / "builds",
        "build_no_index": True,
        "build_find_links": [str(make_wheelhouse(root / "wheels"))],
        "build_timeout_seconds": 120.0,
    }
    values.update(overrides)
    return base.model_copy(update=values)
