"""A cassette miss a user reads in one line: the failure shows the test's own line and the
miss (no realprobe, vcrpy or HTTP-library frames), the message starts with "no recording for
GET ...", names the cassette and the record mode to use, and the short summary reads it."""

from __future__ import annotations

import re

import pytest

pytest_plugins = ["pytester"]

TESTS = '''
import httpx
import pytest
import requests


@pytest.mark.realprobe
def test_httpx_miss():
    httpx.get("https://api.agify.io/?name=ada")


@pytest.mark.realprobe
def test_requests_miss():
    requests.get("https://catfact.ninja/fact", timeout=5)


@pytest.mark.vcr
def test_vcr_miss():
    httpx.get("https://official-joke-api.appspot.com/random_joke")
'''


def _sections(text: str) -> dict[str, list[str]]:
    """Each failure's lines, by test name, between the FAILURES banner and the summary."""
    body = text.split("= FAILURES =", 1)[1].split("short test summary info", 1)[0]
    out: dict[str, list[str]] = {}
    name = ""
    for line in body.splitlines():
        head = re.match(r"^_+ (\S+) _+$", line)
        if head:
            name = head.group(1)
            out[name] = []
        elif name:
            out[name].append(line)
    return out


def test_two_misses_read_in_a_few_lines_each(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_app=TESTS)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--block-network")
    res.assert_outcomes(failed=3)
    text = res.stdout.str()
    sections = _sections(text)
    assert set(sections) == {"test_httpx_miss", "test_requests_miss", "test_vcr_miss"}
    for name, lines in sections.items():
        assert len([ln for ln in lines if ln.strip()]) < 10, (name, lines)
        assert not any(re.search(r"(httpx|requests|urllib3|vcr|realprobe)/\w+\.py", ln)
                       for ln in lines), (name, lines)
    miss = next(ln for ln in sections["test_httpx_miss"] if ln.startswith("E "))
    message = miss.split("CassetteMiss: ", 1)[1]
    assert message.startswith("no recording for GET https://api.agify.io/?name=ada in cassette ")
    assert "cassettes/test_app/test_httpx_miss.json" in message
    assert message.endswith("record it: pytest --realprobe-record-mode=once")
    vcr = next(ln for ln in sections["test_vcr_miss"] if ln.startswith("E "))
    assert "record it: pytest --record-mode=once" in vcr
    summary = [ln for ln in text.splitlines() if ln.startswith("FAILED ")]
    assert len(summary) == 3
    assert all(" - no recording for GET " in ln for ln in summary), summary


def test_fulltrace_keeps_every_frame(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_app=TESTS)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fulltrace",
                                        "-k", "httpx_miss")
    res.assert_outcomes(failed=1)
    assert "httpx/_client.py" in res.stdout.str()
