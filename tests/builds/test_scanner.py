"""The scanner adapters end to end: artifact directories on disk, the OSV fixture, trivy."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from calcgraph.builds.distributions import installed_distributions
from calcgraph.builds.osv import NO_DATABASE_NOTE, OsvScanner, load_advisories
from calcgraph.builds.scanner import (
    ScanError,
    TrivyScanner,
    scanner_from_settings,
    select_scanner,
)
from calcgraph.builds.trivy import parse_trivy_report
from calcgraph.domain.builds.advisories import InstalledDistribution, Severity
from calcgraph.settings import Settings

FIXTURES = Path(__file__).parent / "fixtures"
OSV = FIXTURES / "osv"
TRIVY = shutil.which("trivy")


def make_artifact(root: Path, distributions: dict[str, str]) -> Path:
    """A directory laid out as `pip install --target` leaves it: packages and their dist-info."""
    root.mkdir(parents=True, exist_ok=True)
    for name, version in distributions.items():
        module = name.replace("-", "_").replace(".", "_").lower()
        (root / module).mkdir(exist_ok=True)
        (root / module / "__init__.py").write_text("")
        info = root / f"{module}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: fixture\n"
        )
        (info / "INSTALLER").write_text("pip\n")
    return root


VULNERABLE = {
    "Calcgraph_Fixture.VulnLib": "1.4.0",  # CRITICAL (and its lower-rated alias)
    "calcgraph-fixture-highlib": "1.5.2",  # HIGH, last_affected inclusive
    "calcgraph-fixture-moderate": "3.1.1",  # MEDIUM from database_specific, versions list
    "calcgraph-fixture-v4lib": "1.0.1",  # HIGH from the CVSS v4 vector, second range
    "calcgraph-fixture-lowlib": "2.1.0",  # UNKNOWN, SEMVER range
    "calcgraph-fixture-safe": "1.0",  # in no advisory
}
PATCHED = {
    "calcgraph-fixture-vulnlib": "2.0.0",
    "calcgraph-fixture-highlib": "1.5.3",
    "calcgraph-fixture-moderate": "3.1.2",
    "calcgraph-fixture-v4lib": "0.7",
    "calcgraph-fixture-lowlib": "2.3.0",
}


class TestInstalledDistributions:
    def test_reads_dist_info_metadata(self, tmp_path: Path) -> None:
        artifact = make_artifact(tmp_path / "a", {"Zeta_Pkg": "2.0", "alpha": "1.0"})
        (artifact / "broken-1.0.dist-info").mkdir()  # no METADATA: cannot be matched
        assert installed_distributions(artifact) == [
            InstalledDistribution("alpha", "1.0"),
            InstalledDistribution("Zeta_Pkg", "2.0"),
        ]

    def test_missing_directory(self, tmp_path: Path) -> None:
        with pytest.raises(FileNotFoundError):
            installed_distributions(tmp_path / "nope")

    def test_a_real_pip_install_target(self, tmp_path: Path) -> None:
        wheel = build_wheel(tmp_path, "calcgraph-fixture-vulnlib", "1.4.0")
        target = tmp_path / "target"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-index",
                "--no-deps",
                "--disable-pip-version-check",
                "--target",
                str(target),
                str(wheel),
            ],
            check=True,
            capture_output=True,
        )
        assert installed_distributions(target) == [
            InstalledDistribution("calcgraph-fixture-vulnlib", "1.4.0")
        ]
        report = OsvScanner(OSV).scan(target)
        assert report.refused
        assert report.verdict.warnings[0].startswith(
            "calcgraph-fixture-vulnlib 1.4.0: CGFX-2026-0001 (CRITICAL)"
        )


class TestOsvScanner:
    def test_fixture_database_loads_recursively(self) -> None:
        loaded = load_advisories(OSV)
        assert loaded.documents == 8
        assert loaded.skipped == ()
        # The withdrawn record and the npm record are not indexed.
        assert loaded.index.size == 6

    def test_vulnerable_artifact_end_to_end(self, tmp_path: Path) -> None:
        report = OsvScanner(OSV).scan(make_artifact(tmp_path / "artifact", VULNERABLE))
        by_package = {f.package: f for f in report.findings}
        assert {name: f.severity for name, f in by_package.items()} == {
            "Calcgraph_Fixture.VulnLib": Severity.CRITICAL,
            "calcgraph-fixture-highlib": Severity.HIGH,
            "calcgraph-fixture-moderate": Severity.MEDIUM,
            "calcgraph-fixture-v4lib": Severity.HIGH,
            "calcgraph-fixture-lowlib": Severity.UNKNOWN,
        }
        assert by_package["Calcgraph_Fixture.VulnLib"].advisory_id == "CGFX-2026-0001"
        assert by_package["calcgraph-fixture-v4lib"].score == 8.7
        assert by_package["calcgraph-fixture-moderate"].summary == (
            "Denial of service through a crafted unit string."
        )
        assert report.refused
        assert report.verdict.as_dict() == {
            "critical": 1,
            "high": 2,
            "warnings": [
                "Calcgraph_Fixture.VulnLib 1.4.0: CGFX-2026-0001 (CRITICAL) "
                "Remote code execution in the fixture parser",
                "calcgraph-fixture-highlib 1.5.2: CGFX-2026-0003 (HIGH) "
                "Information disclosure in calcgraph-fixture-highlib",
                "calcgraph-fixture-v4lib 1.0.1: CGFX-2026-0005 (HIGH) "
                "Key disclosure in calcgraph-fixture-v4lib",
            ],
        }
        assert len(report.distributions) == 6
        assert report.scanner.startswith("osv (")

    def test_patched_artifact_is_clean(self, tmp_path: Path) -> None:
        report = OsvScanner(OSV).scan(make_artifact(tmp_path / "artifact", PATCHED))
        assert report.findings == ()
        assert not report.refused

    def test_high_only_warns(self, tmp_path: Path) -> None:
        artifact = make_artifact(tmp_path / "a", {"calcgraph-fixture-highlib": "1.2"})
        report = OsvScanner(OSV).scan(artifact)
        assert not report.refused
        assert report.verdict.as_dict()["high"] == 1

    def test_given_distributions_spare_the_directory(self) -> None:
        scanner = OsvScanner(OSV)
        report = scanner.scan(
            "registry.example/fn:1", [InstalledDistribution("calcgraph-fixture-vulnlib", "1")]
        )
        assert report.refused
        with pytest.raises(ScanError, match="not an image"):
            scanner.scan("registry.example/fn:1")

    def test_zip_dump_and_unreadable_documents(self, tmp_path: Path) -> None:
        dump = tmp_path / "all.zip"
        with zipfile.ZipFile(dump, "w") as archive:
            for path in sorted(OSV.rglob("*.json")):
                archive.write(path, path.name)
            archive.writestr("broken.json", "{not json")
            archive.writestr("list.json", "[1, 2]")
        loaded = load_advisories(dump)
        assert loaded.index.size == 6
        assert loaded.skipped == ("broken.json", "list.json")
        artifact = make_artifact(tmp_path / "a", VULNERABLE)
        report = OsvScanner(dump).scan(artifact)
        assert report.refused
        assert report.notes == ("2 unreadable advisory documents were skipped",)

    def test_database_is_read_once(self, tmp_path: Path) -> None:
        db = tmp_path / "db"
        shutil.copytree(OSV, db)
        scanner = OsvScanner(db)
        artifact = make_artifact(tmp_path / "a", VULNERABLE)
        assert scanner.scan(artifact).refused
        shutil.rmtree(db)
        assert scanner.scan(artifact).refused

    def test_no_database_matches_nothing_and_says_so(self, tmp_path: Path) -> None:
        report = OsvScanner(None).scan(make_artifact(tmp_path / "a", VULNERABLE))
        assert report.findings == ()
        assert report.notes == (NO_DATABASE_NOTE,)

    def test_missing_database_or_artifact_is_a_scan_error(self, tmp_path: Path) -> None:
        with pytest.raises(ScanError, match="does not exist"):
            OsvScanner(tmp_path / "nope").scan(tmp_path, [])
        with pytest.raises(ScanError, match="does not exist"):
            OsvScanner(OSV).scan(tmp_path / "no-artifact")


class TestSelection:
    def test_auto_without_trivy_is_osv(self) -> None:
        scanner = select_scanner("auto", OSV, trivy_program="")
        assert isinstance(scanner, OsvScanner)
        assert select_scanner("auto", OSV, trivy_program="") is scanner  # read once per path

    def test_auto_with_trivy_is_trivy(self) -> None:
        scanner = select_scanner("auto", OSV, trivy_program="/opt/trivy")
        assert isinstance(scanner, TrivyScanner)

    def test_osv_is_forced(self) -> None:
        assert isinstance(select_scanner("osv", OSV, trivy_program="/opt/trivy"), OsvScanner)

    def test_trivy_insisted_on_but_missing(self) -> None:
        with pytest.raises(ScanError, match="not on PATH"):
            select_scanner("trivy", None, trivy_program="")

    def test_from_settings(self) -> None:
        settings = Settings(scanner="osv", advisory_db_path=OSV)
        scanner = scanner_from_settings(settings)
        assert isinstance(scanner, OsvScanner)
        assert scanner.advisory_path == OSV


class TestTrivy:
    def test_report_parsing_keeps_python_packages_only(self) -> None:
        document = json.loads((FIXTURES / "trivy-report.json").read_text())
        findings, packages = parse_trivy_report(document)
        assert [(f.package, f.advisory_id, f.severity) for f in findings] == [
            ("calcgraph-fixture-vulnlib", "CVE-2026-90001", Severity.CRITICAL),
            ("calcgraph-fixture-highlib", "CVE-2026-90003", Severity.HIGH),
        ]
        assert findings[1].score == 7.5  # no Severity word: the highest CVSS v3 score rates it
        assert len(packages) == 3

    def test_command(self) -> None:
        scanner = TrivyScanner("trivy", timeout_seconds=120, skip_db_update=True)
        assert scanner.command(Path("/a")) == [
            "trivy",
            "rootfs",
            "--format",
            "json",
            "--scanners",
            "vuln",
            "--list-all-pkgs",
            "--quiet",
            "--timeout",
            "120s",
            "--skip-db-update",
            "/a",
        ]
        assert scanner.command("reg/fn:1")[1] == "image"

    def test_process_handling(self, tmp_path: Path) -> None:
        # A stand-in program that answers as trivy does, to exercise the process handling
        # where trivy itself is not installed.
        program = tmp_path / "fake-trivy"
        program.write_text(f"#!/bin/sh\ncat '{FIXTURES / 'trivy-report.json'}'\n")
        program.chmod(0o755)
        report = TrivyScanner(str(program)).scan(tmp_path)
        assert report.refused
        assert report.verdict.as_dict()["high"] == 1
        failing = tmp_path / "failing-trivy"
        failing.write_text("#!/bin/sh\necho 'no database' >&2\nexit 1\n")
        failing.chmod(0o755)
        with pytest.raises(ScanError, match="no database"):
            TrivyScanner(str(failing)).scan(tmp_path)

    @pytest.mark.skipif(TRIVY is None, reason="the trivy program is not on PATH")
    def test_real_trivy_on_an_artifact(self, tmp_path: Path) -> None:
        assert TRIVY is not None
        artifact = make_artifact(tmp_path / "a", PATCHED)
        try:
            report = TrivyScanner(TRIVY, timeout_seconds=120).scan(artifact)
        except ScanError as exc:
            pytest.skip(f"trivy is installed but could not scan (no database offline?): {exc}")
        # Invented packages are in no real advisory.
        assert report.findings == ()


def build_wheel(where: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel, built by hand so the test needs no build backend."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": b"VALUE = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: calcgraph-tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, content in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(content)}")
    record.append(f"{info}/RECORD,,")
    wheel = where / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, content in files.items():
            archive.writestr(path, content)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel
