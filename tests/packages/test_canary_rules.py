"""The canary's pure rules (contract 11): the weighted route, the observed figures, the
verdict, and which splits a deployment refuses."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from calcgraph.domain.errors import ValidationError
from calcgraph.domain.packages.canary_rules import (
    Criteria,
    FinishedJob,
    Observed,
    check_split,
    observe,
    p95,
    route,
    verdict,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job(ms: float, failed: bool = False, kind: str | None = None) -> FinishedJob:
    return FinishedJob(failed, kind, T0, T0 + timedelta(milliseconds=ms))


class TestRoute:
    def test_draws_fall_on_the_shares_laid_end_to_end(self) -> None:
        split = [("1.0.0", 90.0), ("2.0.0", 10.0)]
        assert route(split, 0.0) == "1.0.0"
        assert route(split, 0.8999) == "1.0.0"
        assert route(split, 0.9) == "2.0.0"
        assert route(split, 0.999999) == "2.0.0"

    def test_a_zero_share_is_never_chosen(self) -> None:
        split = [("1.0.0", 0.0), ("2.0.0", 100.0), ("3.0.0", 0.0)]
        assert {route(split, d / 100) for d in range(100)} == {"2.0.0"}

    def test_proportions_over_many_seeded_draws(self) -> None:
        draws = random.Random(1)
        split = [("a", 10.0), ("b", 90.0)]
        counts = Counter(route(split, draws.random()) for _ in range(10_000))
        assert 900 <= counts["a"] <= 1100

    def test_a_split_of_100_versions(self) -> None:
        split = [(f"1.{i}.0", 1.0) for i in range(100)]
        assert {route(split, i / 100 + 0.001) for i in range(100)} == {v for v, _ in split}

    def test_no_positive_share_is_refused(self) -> None:
        with pytest.raises(ValueError, match="positive share"):
            route([("1.0.0", 0.0)], 0.5)


class TestObserve:
    def test_cancelled_jobs_count_neither_way(self) -> None:
        seen = observe([job(10), job(20, True, "timeout"), job(30, True, "cancelled")])
        assert (seen.jobs, seen.failed, seen.error_rate) == (2, 1, 0.5)
        assert seen.kinds == {"timeout": 1}

    def test_p95_is_nearest_rank(self) -> None:
        assert p95([]) is None
        assert p95([float(i) for i in range(1, 101)]) == 95
        assert p95([5.0]) == 5
        assert observe([job(i) for i in range(1, 21)]).latency_p95_ms == 19

    def test_nothing_finished(self) -> None:
        assert observe([]) == Observed()


class TestVerdict:
    criteria = Criteria(error_rate_max=0.1, latency_p95_max_ms=200)

    def test_before_the_end_only_a_failing_candidate_ends_early(self) -> None:
        failing = observe([job(10, True, "timeout")] * 20)
        assert verdict(observe([job(10, True, "timeout")] * 19), self.criteria, due=False) is None
        early = verdict(failing, self.criteria, due=False)
        assert early is not None
        assert early.action == "rolled_back"
        assert "timeout: 20" in early.reason
        assert verdict(observe([job(10)] * 50), self.criteria, due=False) is None

    def test_at_the_end(self) -> None:
        ok = verdict(
            observe([job(100)] * 19 + [job(100, True, "user_error")]), self.criteria, due=True
        )
        assert ok is not None
        assert ok.action == "promoted"
        slow = verdict(observe([job(500)] * 5), self.criteria, due=True)
        assert slow is not None
        assert slow.action == "rolled_back"
        assert "p95" in slow.reason
        failing = verdict(observe([job(1, True, "user_error")] * 2), self.criteria, due=True)
        assert failing is not None
        assert failing.action == "rolled_back"
        nothing = verdict(observe([]), self.criteria, due=True)
        assert nothing is not None
        assert nothing.action == "rolled_back"

    def test_no_criteria_promotes_what_ran(self) -> None:
        decided = verdict(observe([job(9000, True, "timeout")]), Criteria(), due=True)
        assert decided is not None
        assert decided.action == "promoted"


class TestCheckSplit:
    loc = ("manifest", "package", "deployment", "canary", "traffic_split")

    def test_hosted_versions_and_the_deployed_one(self) -> None:
        check_split({"1.0.0": 90, "2.0.0": 10}, ["1.0.0"], "2.0.0", loc=self.loc)

    def test_unhosted_or_missing_the_deployed_one(self) -> None:
        with pytest.raises(ValidationError, match="9.9.9"):
            check_split({"1.0.0": 90, "9.9.9": 10}, ["1.0.0"], "2.0.0", loc=self.loc)
        with pytest.raises(ValidationError, match="must name the version deployed now"):
            check_split({"1.0.0": 100}, ["1.0.0"], "2.0.0", loc=self.loc)

    def test_a_refusal_names_a_bounded_few(self) -> None:
        split = {f"3.{i}.0": 1.0 for i in range(100)}
        with pytest.raises(ValidationError) as caught:
            check_split(split, [f"1.{i}.0" for i in range(500)], "3.0.0", loc=self.loc)
        assert "and 89 more" in caught.value.message
        assert len(caught.value.message) < 600
