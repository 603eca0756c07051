"""Operations tests: metrics, logs and rate limits over the real app; the job, tick, pool and
cache metrics use the execution fixtures (a whole platform with workers and sandboxes)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.execution.conftest import exec_url, platform  # noqa: F401

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse_metrics(text: str) -> Samples:
    """Every sample of a /metrics answer, keyed by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
