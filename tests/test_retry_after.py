"""One Retry-After parser for every reader: API answers, the gates, the proxy, the LLM client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from realprobe.retry_after import parse_retry_after, retry_after_of

DATE = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)


def http_date(dt: datetime) -> str:
    return format_datetime(dt, usegmt=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("3", 3.0), (" 2.5 ", 2.5), ("-4", 0.0), ("nan", None), ("inf", None), ("soon", None),
     ("", None), (None, None)],
)
def test_seconds_form(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_http_date_form_counts_from_the_answers_date_header() -> None:
    later = http_date(DATE + timedelta(seconds=120))
    assert parse_retry_after(later, http_date(DATE)) == pytest.approx(120.0)
    assert parse_retry_after(http_date(DATE - timedelta(seconds=5)), http_date(DATE)) == 0.0


def test_the_llm_client_reads_the_http_date_form_too() -> None:
    """The LLM limiter once read only seconds; an HTTP date was ignored."""
    headers = httpx.Headers({"Retry-After": http_date(DATE + timedelta(seconds=30)),
                             "Date": http_date(DATE)})
    assert retry_after_of(headers) == pytest.approx(30.0)
    assert retry_after_of(httpx.Headers({"retry-after-ms": "1500", "retry-after": "9"})) == 1.5
    assert retry_after_of(httpx.Headers({"retry-after-ms": "nan", "retry-after": "9"})) == 9.0
    assert retry_after_of(object()) is None
