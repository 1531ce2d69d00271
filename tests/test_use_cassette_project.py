"""A small user project adopts realprobe cassettes with a marker and nothing else: its own
module builds its own `httpx.Client`, another uses `requests`. It records against the loopback
sandbox with `once`, replays with the network blocked and sockets guarded, and `new_episodes`
adds a new test's interactions while keeping the old ones byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

WEATHER = '''
import httpx


def post_title(post_id):
    with httpx.Client(timeout=5) as client:   # its own client: no transport passed in
        r = client.get(f"https://jsonplaceholder.typicode.com/posts/{post_id}")
        r.raise_for_status()
        return r.json()["title"]


async def todo_done(todo_id):
    async with httpx.AsyncClient(timeout=5) as client:
        r = await client.get(f"https://jsonplaceholder.typicode.com/todos/{todo_id}")
        return r.json()["completed"]
'''

FACTS = '''
import requests


def cat_fact():
    r = requests.get("https://catfact.ninja/fact", params={"max_length": 140}, timeout=5)
    r.raise_for_status()
    return r.json()["fact"]
'''

CONFTEST = '''
import socket

import pytest

CONNECTS = []
_real = socket.socket.connect


def _spy(self, address):
    CONNECTS.append(address)
    return _real(self, address)


socket.socket.connect = _spy


@pytest.fixture(autouse=True)
def _report_connects(request):
    before = len(CONNECTS)
    yield
    with open("connects.log", "a") as fh:
        fh.write(f"{request.node.name} {len(CONNECTS) - before}\\n")
'''

TESTS = '''
import pytest

import facts
import weather


@pytest.mark.realprobe
def test_post_title():
    assert weather.post_title(3)


@pytest.mark.realprobe
async def test_todo():
    assert await weather.todo_done(5) in (True, False)


@pytest.mark.realprobe
def test_cat_fact():
    assert len(facts.cat_fact()) > 10


@pytest.mark.realprobe("shared.json")
def test_shared_first():
    assert weather.post_title(1)
'''

NEW_TEST = '''

@pytest.mark.realprobe("shared.json")
def test_shared_second():
    assert weather.post_title(2) and facts.cat_fact()


@pytest.mark.realprobe
def test_brand_new():
    assert weather.post_title(7)
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(weather=WEATHER, facts=FACTS, conftest=CONFTEST, test_app=TESTS)
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    return pytester


def _connects(p: pytest.Pytester) -> dict[str, int]:
    log = p.path / "connects.log"
    out: dict[str, int] = {}
    for line in log.read_text().splitlines():
        name, n = line.split()
        out[name] = out.get(name, 0) + int(n)
    log.unlink()
    return out


def test_record_once_then_replay_offline_then_new_episodes(
    project: pytest.Pytester, calm_sandbox: str
) -> None:
    p = project
    cassettes = p.path / "cassettes" / "test_app"

    # nothing recorded yet: replay-only fails with a hint naming the pytest option
    missing = p.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    missing.assert_outcomes(failed=4)
    assert "--realprobe-record-mode=once" in missing.stdout.str()

    rec = p.runpytest_subprocess("-q", "--realprobe-record-mode=once",
                                 f"--realprobe-sandbox={calm_sandbox}")
    rec.assert_outcomes(passed=4)
    assert all(n > 0 for n in _connects(p).values())  # it really went to the sandbox
    files = sorted(x.name for x in cassettes.iterdir())
    assert files == ["test_cat_fact.json", "test_post_title.json", "test_todo.json"]
    cat = json.loads((cassettes / "test_cat_fact.json").read_text())
    uri = cat["interactions"][0]["request"]["uri"]
    assert uri.startswith("https://catfact.ninja/fact")  # real URLs, not the sandbox's
    before = {f: (cassettes / f).read_bytes() for f in files}
    shared_before = (p.path / "shared.json").read_bytes()

    # replay: network blocked, sockets counted
    rep = p.runpytest_subprocess("-q", "--realprobe-block-network")
    rep.assert_outcomes(passed=4)
    assert set(_connects(p).values()) == {0}
    assert {f: (cassettes / f).read_bytes() for f in files} == before  # replay writes nothing

    # a new test: new_episodes records only what is new
    p.path.joinpath("test_app.py").write_text(TESTS + NEW_TEST)
    blocked = p.runpytest_subprocess("-q", "--realprobe-block-network")
    blocked.assert_outcomes(passed=4, failed=2)  # a missing cassette fails at its request
    _connects(p)
    epi = p.runpytest_subprocess("-q", "--realprobe-record-mode=new_episodes",
                                 f"--realprobe-sandbox={calm_sandbox}")
    epi.assert_outcomes(passed=6)
    counts = _connects(p)
    assert counts["test_post_title"] == 0 and counts["test_cat_fact"] == 0  # replayed
    assert counts["test_brand_new"] > 0 and counts["test_shared_second"] > 0
    assert {f: (cassettes / f).read_bytes() for f in files} == before
    assert (cassettes / "test_brand_new.json").exists()

    old = json.loads(shared_before)["interactions"]
    new = json.loads((p.path / "shared.json").read_bytes())["interactions"]
    assert len(new) > len(old) and new[: len(old)] == old
    old_text = shared_before.decode()
    new_text = (p.path / "shared.json").read_text()
    first = json.dumps(old[0], indent=1, ensure_ascii=False).replace("\n", "\n  ")
    assert first in old_text and first in new_text  # the old interaction, byte for byte

    final = p.runpytest_subprocess("-q", "--realprobe-block-network")
    final.assert_outcomes(passed=6)
    assert set(_connects(p).values()) == {0}


def test_a_test_that_fails_while_recording_writes_no_cassette(
    pytester: pytest.Pytester, calm_sandbox: str
) -> None:
    pytester.makepyfile(weather=WEATHER, test_fail='''
import pytest
import weather


@pytest.mark.realprobe
def test_broken():
    weather.post_title(1)
    assert False, "the test itself is wrong"
''')
    result = pytester.runpytest_subprocess("-q", "--realprobe-record-mode=all",
                                           f"--realprobe-sandbox={calm_sandbox}")
    result.assert_outcomes(failed=1)
    folder = Path(pytester.path / "cassettes" / "test_fail")
    assert not folder.exists() or not any(folder.iterdir())


def test_block_network_allows_named_hosts(pytester: pytest.Pytester, calm_sandbox: str) -> None:
    pytester.makepyfile(test_net=f'''
import httpx
import pytest

def test_sandbox_is_reachable():
    assert httpx.get("{calm_sandbox}/_health").status_code in (200, 404)
''')
    blocked = pytester.runpytest_subprocess("-q", "--realprobe-block-network")
    blocked.assert_outcomes(failed=1)
    assert "network blocked by --realprobe-block-network" in blocked.stdout.str()
    allowed = pytester.runpytest_subprocess(
        "-q", "--realprobe-block-network", "--realprobe-allowed-hosts=127.0.0.1"
    )
    allowed.assert_outcomes(passed=1)
