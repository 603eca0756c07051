"""While Redis is down every call meets the error: its callers warn once a minute, not per call."""

from __future__ import annotations

import logging

import pytest

from calcgraph.ops.redis_clients import DOWN_LOG_SECONDS, DownWarning


def test_a_warning_is_logged_once_a_minute_with_the_calls_arguments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warn = DownWarning(
        logging.getLogger("calcgraph.test.down"), "%s while Redis does not answer: %s"
    )
    with caplog.at_level(logging.WARNING, logger="calcgraph.test.down"):
        warn("no notifications", ConnectionError("refused"))
        warn("no notifications", ConnectionError("refused again"))
        assert [r.getMessage() for r in caplog.records] == [
            "no notifications while Redis does not answer: refused"
        ]
        warn.last -= DOWN_LOG_SECONDS + 1  # a minute on
        warn("no notifications", ConnectionError("still refused"))
    assert len(caplog.records) == 2
    assert caplog.records[1].getMessage().endswith("still refused")
