"""OSV matching and the scan verdict, on plain records."""

from __future__ import annotations

from typing import Any

import pytest

from calcgraph.domain.builds.advisories import (
    AdvisoryIndex,
    Finding,
    InstalledDistribution,
    Severity,
    advisory_severity,
    cvss_severity,
    match_advisories,
    score_severity,
    verdict,
    version_affected,
)

CRITICAL_V3 = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"  # 9.8
HIGH_V3 = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N"  # 7.5
LOW_V3 = "CVSS:3.1/AV:L/AC:H/PR:L/UI:R/S:U/C:L/I:N/A:N"  # 2.2
HIGH_V4 = "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:N/VA:N/SC:N/SI:N/SA:N"  # 8.7


def pypi(name: str, **fields: Any) -> dict[str, Any]:
    return {"package": {"ecosystem": "PyPI", "name": name}, **fields}


def events(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"type": "ECOSYSTEM", "events": [{kind: value} for kind, value in pairs]}


class TestSeverity:
    @pytest.mark.parametrize(
        ("score", "severity"),
        [
            (10.0, Severity.CRITICAL),
            (9.0, Severity.CRITICAL),
            (8.9, Severity.HIGH),
            (7.0, Severity.HIGH),
            (6.9, Severity.MEDIUM),
            (4.0, Severity.MEDIUM),
            (3.9, Severity.LOW),
            (0.1, Severity.LOW),
        ],
    )
    def test_score_bands(self, score: float, severity: Severity) -> None:
        assert score_severity(score) is severity

    def test_cvss_vectors(self) -> None:
        assert cvss_severity("CVSS_V3", CRITICAL_V3) == (Severity.CRITICAL, 9.8)
        assert cvss_severity("CVSS_V3", HIGH_V3) == (Severity.HIGH, 7.5)
        assert cvss_severity("CVSS_V4", HIGH_V4) == (Severity.HIGH, 8.7)
        assert cvss_severity("CVSS_V2", "AV:N/AC:L/Au:N/C:C/I:C/A:C") == (Severity.HIGH, 10.0)

    @pytest.mark.parametrize(
        ("kind", "vector"),
        [
            ("CVSS_V3", "garbage"),
            ("CVSS_V3", "CVSS:3.1/AV:N"),
            ("CVSS_V4", "CVSS:4.0/AV:N"),
            ("Ubuntu", "high"),
        ],
    )
    def test_unreadable_vectors_give_none(self, kind: str, vector: str) -> None:
        assert cvss_severity(kind, vector) is None

    def test_v4_is_preferred_and_a_bad_vector_falls_through(self) -> None:
        record = {
            "severity": [
                {"type": "CVSS_V3", "score": LOW_V3},
                {"type": "CVSS_V4", "score": HIGH_V4},
            ]
        }
        assert advisory_severity(record) == (Severity.HIGH, 8.7)
        broken = {
            "severity": [
                {"type": "CVSS_V4", "score": "nonsense"},
                {"type": "CVSS_V3", "score": LOW_V3},
            ]
        }
        assert advisory_severity(broken) == (Severity.LOW, 2.2)

    @pytest.mark.parametrize(
        ("word", "severity"),
        [
            ("CRITICAL", Severity.CRITICAL),
            ("high", Severity.HIGH),
            ("MODERATE", Severity.MEDIUM),
            ("LOW", Severity.LOW),
            ("whatever", Severity.UNKNOWN),
        ],
    )
    def test_database_specific_word(self, word: str, severity: Severity) -> None:
        assert advisory_severity({"database_specific": {"severity": word}})[0] is severity

    def test_affected_entry_severity_takes_precedence(self) -> None:
        record = {"severity": [{"type": "CVSS_V3", "score": LOW_V3}]}
        affected = {"severity": [{"type": "CVSS_V3", "score": CRITICAL_V3}]}
        assert advisory_severity(record, affected)[0] is Severity.CRITICAL

    def test_nothing_known_is_unknown(self) -> None:
        assert advisory_severity({}) == (Severity.UNKNOWN, None)


class TestVersions:
    @pytest.mark.parametrize(
        ("version", "expected"),
        [("0.1", True), ("1.9.9", True), ("2.0.0", False), ("2.0", False), ("3", False)],
    )
    def test_introduced_zero_fixed(self, version: str, expected: bool) -> None:
        entry = pypi("x", ranges=[events(("introduced", "0"), ("fixed", "2.0.0"))])
        assert version_affected(entry, version) is expected

    @pytest.mark.parametrize(
        ("version", "expected"),
        [("0.9", False), ("1.0", True), ("1.5.2", True), ("1.5.2.post1", False), ("1.5.3", False)],
    )
    def test_introduced_last_affected(self, version: str, expected: bool) -> None:
        entry = pypi("x", ranges=[events(("introduced", "1.0"), ("last_affected", "1.5.2"))])
        assert version_affected(entry, version) is expected

    @pytest.mark.parametrize(
        ("version", "expected"),
        [("1.0", True), ("1.9", True), ("2.0", False), ("2.5", False), ("3.0", True), ("4", True)],
    )
    def test_reintroduced_and_open_ended(self, version: str, expected: bool) -> None:
        # Events out of order on purpose: OSV evaluates them in version order.
        entry = pypi(
            "x",
            ranges=[events(("introduced", "3.0"), ("fixed", "2.0"), ("introduced", "1.0"))],
        )
        assert version_affected(entry, version) is expected

    def test_pre_releases_order_before_their_release(self) -> None:
        entry = pypi("x", ranges=[events(("introduced", "1.0rc1"), ("fixed", "1.0.3"))])
        assert version_affected(entry, "1.0rc2")
        assert version_affected(entry, "1.0")
        assert not version_affected(entry, "1.0b9")

    def test_explicit_versions_compare_as_pep_440(self) -> None:
        entry = pypi("x", versions=["3.1.0", "3.1.1", "legacy-build"])
        assert version_affected(entry, "3.1")
        assert version_affected(entry, "3.1.1")
        assert version_affected(entry, "legacy-build")
        assert not version_affected(entry, "3.1.2")

    def test_git_ranges_and_unreadable_versions_are_ignored(self) -> None:
        entry = pypi(
            "x",
            ranges=[
                {"type": "GIT", "repo": "r", "events": [{"introduced": "0"}]},
                events(("introduced", "not a version"), ("fixed", "2.0")),
            ],
        )
        assert not version_affected(entry, "1.0")
        assert not version_affected(pypi("x", ranges=[events(("introduced", "0"))]), "n/a")


class TestIndex:
    def test_names_are_normalised_and_other_ecosystems_ignored(self) -> None:
        records = [
            {
                "id": "A-1",
                "summary": "pypi one",
                "affected": [pypi("Fixture_Lib", ranges=[events(("introduced", "0"))])],
            },
            {
                "id": "A-2",
                "affected": [
                    {"package": {"ecosystem": "npm", "name": "fixture-lib"}, "versions": ["1.0"]}
                ],
            },
        ]
        found = match_advisories([InstalledDistribution("fixture.lib", "1.0")], records)
        assert [f.advisory_id for f in found] == ["A-1"]
        assert found[0].package == "fixture.lib"
        assert AdvisoryIndex(records).size == 1

    def test_withdrawn_and_malformed_records_are_ignored(self) -> None:
        everything = [pypi("lib", ranges=[events(("introduced", "0"))])]
        records: list[dict[str, Any]] = [
            {"id": "W-1", "withdrawn": "2026-01-01T00:00:00Z", "affected": everything},
            {"affected": everything},
            {"id": "M-1", "affected": ["not a dict", {"package": "nope"}]},
            {"id": "M-2", "affected": None},
        ]
        assert match_advisories([InstalledDistribution("lib", "1")], records) == []

    def test_aliases_count_once_as_the_most_severe(self) -> None:
        affected = [pypi("lib", ranges=[events(("introduced", "0"))])]
        records: list[dict[str, Any]] = [
            {
                "id": "PYSEC-1",
                "aliases": ["CVE-1"],
                "affected": affected,
                "database_specific": {"severity": "MODERATE"},
            },
            {
                "id": "GHSA-1",
                "aliases": ["CVE-1", "PYSEC-1"],
                "affected": affected,
                "severity": [{"type": "CVSS_V3", "score": CRITICAL_V3}],
            },
            {"id": "GHSA-2", "affected": affected},
        ]
        found = match_advisories([InstalledDistribution("lib", "1")], records)
        assert [(f.advisory_id, f.severity) for f in found] == [
            ("GHSA-1", Severity.CRITICAL),
            ("GHSA-2", Severity.UNKNOWN),
        ]

    def test_summary_falls_back_to_the_first_line_of_details(self) -> None:
        record = {
            "id": "D-1",
            "details": "  First line.\nSecond line.",
            "affected": [pypi("lib", versions=["1"])],
        }
        (finding,) = match_advisories([InstalledDistribution("lib", "1")], [record])
        assert finding.summary == "First line."


class TestVerdict:
    def finding(self, package: str, severity: Severity, summary: str = "s") -> Finding:
        return Finding(package, "1.0", f"ID-{package}", severity, summary=summary)

    def test_critical_refuses_and_high_only_warns(self) -> None:
        result = verdict(
            [
                self.finding("b-high", Severity.HIGH, "leaks"),
                self.finding("a-crit", Severity.CRITICAL, "runs code"),
                self.finding("c-med", Severity.MEDIUM),
                self.finding("d-unknown", Severity.UNKNOWN),
            ]
        )
        assert result.refused
        assert result.as_dict() == {
            "critical": 1,
            "high": 1,
            "warnings": [
                "a-crit 1.0: ID-a-crit (CRITICAL) runs code",
                "b-high 1.0: ID-b-high (HIGH) leaks",
            ],
        }
        assert len(result.findings) == 4

    def test_high_alone_does_not_refuse(self) -> None:
        result = verdict([self.finding("x", Severity.HIGH, "")])
        assert not result.refused
        assert result.warnings == ("x 1.0: ID-x (HIGH)",)

    def test_nothing_found(self) -> None:
        assert verdict([]).as_dict() == {"critical": 0, "high": 0, "warnings": []}
