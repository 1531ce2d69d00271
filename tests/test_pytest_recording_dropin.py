"""A project written for pytest-recording runs unchanged under realprobe's plugin when
pytest-recording is not installed; with pytest-recording installed, realprobe steps aside."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).parent / "data" / "pytest_recording_project"


def run(folder: Path, *args: str, pythonpath: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    root = str(Path(__file__).resolve().parents[1])  # this checkout's realprobe, in any case
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, root) if p)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *args], cwd=folder, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    assert importlib.util.find_spec("pytest_recording") is None
    folder = tmp_path / "project"
    shutil.copytree(SAMPLE, folder)
    return folder


def test_the_sample_suite_passes_unchanged(project: Path) -> None:
    before = {p: p.read_bytes() for p in project.rglob("*.yaml")}
    result = run(project, "--block-network", "--record-mode=none")
    assert "10 passed" in result.stdout, result.stdout + result.stderr
    after = {p: p.read_bytes() for p in project.rglob("*.yaml")}
    assert after == before  # replay writes nothing, and no cassette appeared for the test
    # without a request (pytest-recording passes it too)


def test_a_missing_recording_fails_naming_the_option(project: Path) -> None:
    (project / "cassettes" / "test_sample" / "test_get_user.yaml").unlink()
    result = run(project, "-k", "test_get_user", "--block-network")
    assert "1 failed" in result.stdout, result.stdout
    assert "--record-mode=once" in result.stdout


def test_realprobe_steps_aside_when_pytest_recording_is_installed(project: Path) -> None:
    fake = project.parent / "site"
    (fake / "pytest_recording").mkdir(parents=True)
    (fake / "pytest_recording" / "__init__.py").write_text("")
    (fake / "pytest_recording" / "plugin.py").write_text(
        "def pytest_addoption(parser):\n"
        "    parser.getgroup('recording').addoption('--record-mode', default='none')\n"
        "    parser.getgroup('recording').addoption('--block-network', action='store_true')\n"
    )
    (project / "test_own.py").write_text(
        "import pytest\n\n@pytest.mark.realprobe('own.json')\n"
        "def test_own_marker():\n    assert True\n"
    )
    result = run(project, "-v", "-p", "pytest_recording.plugin", "test_own.py",
                 pythonpath=str(fake))
    assert "1 passed" in result.stdout, result.stdout + result.stderr
    assert "already added" not in result.stderr
    assert "pytest-recording is active" in result.stdout


def test_record_once_writes_pytest_recordings_layout_that_vcrpy_reads(project: Path) -> None:
    from tests.loopback_http import serving

    (project / "test_rec.py").write_text(
        "import os\n\nimport httpx\nimport pytest\n\n"
        "@pytest.mark.vcr\n"
        "def test_fetch():\n"
        "    assert httpx.get(os.environ['ORIGIN'] + '/word').json() == {'word': 'hi'}\n"
    )
    with serving({"/word": (200, "application/json", b'{"word": "hi"}')}) as up:
        os.environ["ORIGIN"] = up.url
        try:
            rec = run(project, "test_rec.py", "--record-mode=once")
        finally:
            del os.environ["ORIGIN"]
        assert "1 passed" in rec.stdout, rec.stdout + rec.stderr
        assert len(up.requests) == 1
        cassette = project / "cassettes" / "test_rec" / "test_fetch.yaml"
        assert cassette.exists()
        import httpx
        import vcr

        with vcr.use_cassette(str(cassette), record_mode="none"):
            assert httpx.get(up.url + "/word").json() == {"word": "hi"}
        assert len(up.requests) == 1  # vcrpy replayed it


def test_with_pytest_recording_disabled_realprobe_serves_its_conventions(project: Path) -> None:
    fake = project.parent / "site"
    (fake / "pytest_recording").mkdir(parents=True)
    (fake / "pytest_recording" / "__init__.py").write_text("")
    result = run(project, "--block-network", "-p", "no:recording", pythonpath=str(fake))
    assert "10 passed" in result.stdout, result.stdout + result.stderr
    assert "pytest-recording is active" not in result.stdout


def test_default_cassette_marker_and_extra_paths_as_pytest_recording(project: Path) -> None:
    """`default_cassette` names the test's cassette; an extra path relative to the project
    root is found there (not doubled under the cassette folder); a missing one adds nothing."""
    own = project / "cassettes" / "test_conv" / "chosen.yaml"
    own.parent.mkdir(parents=True)
    shutil.copy(project / "cassettes" / "test_sample" / "test_get_user.yaml", own)
    (project / "test_conv.py").write_text(
        "import requests\nimport pytest\n\n"
        "@pytest.mark.default_cassette('chosen.yaml')\n@pytest.mark.vcr\n"
        "def test_named():\n"
        "    assert requests.get('https://api.example.test/users/1').json()['name'] == 'Ada'\n\n"
        "@pytest.mark.vcr('cassettes/test_sample/test_get_user.yaml', 'nowhere/missing.yaml')\n"
        "def test_root_relative_extra():\n"
        "    assert requests.get('https://api.example.test/users/1').json()['name'] == 'Ada'\n"
    )
    result = run(project, "test_conv.py", "--block-network", "--record-mode=once")
    assert "2 passed" in result.stdout, result.stdout + result.stderr
    assert not (project / "cassettes" / "test_conv" / "test_named.yaml").exists()
    assert not (project / "cassettes" / "test_conv" / "test_root_relative_extra.yaml").exists()


def test_vcrpy_hooks_and_registered_matchers_are_honoured(project: Path) -> None:
    import gzip

    from tests.loopback_http import serving

    (project / "conftest.py").write_text(
        "import pytest\n\n"
        "def drop_trace(response):\n"
        "    response['headers'].pop('X-Trace', None)\n"
        "    return response\n\n"
        "def skip_health(request):\n"
        "    return None if request.path == '/health' else request\n\n"
        "def same_last_segment(r1, r2):\n"
        "    assert r1.path.rsplit('/', 1)[-1] == r2.path.rsplit('/', 1)[-1]\n\n"
        "def pytest_recording_configure(config, vcr):\n"
        "    vcr.register_matcher('last_segment', same_last_segment)\n\n"
        "@pytest.fixture(scope='module')\n"
        "def vcr_config():\n"
        "    return {'before_record_response': drop_trace,\n"
        "            'before_record_request': [skip_health],\n"
        "            'decode_compressed_response': True,\n"
        "            'match_on': ['method', 'last_segment']}\n"
    )
    (project / "test_hooks.py").write_text(
        "import os\n\nimport requests\nimport pytest\n\n"
        "@pytest.mark.vcr\n"
        "def test_fetch():\n"
        "    origin = os.environ.get('ORIGIN', 'http://127.0.0.1:9')\n"
        "    assert requests.get(origin + '/v1/word').json() == {'word': 'hi'}\n"
        "    if 'ORIGIN' in os.environ:\n"
        "        requests.get(origin + '/health')\n"
    )
    routes = {"/v1/word": (200, "application/json", gzip.compress(b'{"word": "hi"}'),
                           {"Content-Encoding": "gzip", "X-Trace": "secret-trace-id"}),
              "/health": (200, "text/plain", b"ok")}
    with serving(routes) as up:
        os.environ["ORIGIN"] = up.url
        try:
            rec = run(project, "test_hooks.py", "--record-mode=once")
        finally:
            del os.environ["ORIGIN"]
    assert "1 passed" in rec.stdout, rec.stdout + rec.stderr
    text = (project / "cassettes" / "test_hooks" / "test_fetch.yaml").read_text()
    assert "secret-trace-id" not in text and "X-Trace" not in text  # before_record_response
    assert "/health" not in text  # before_record_request returned None
    assert '{"word": "hi"}' in text and "Content-Encoding" not in text  # decoded
    assert "ignores the vcrpy option" not in rec.stdout + rec.stderr
    # replayed with the registered matcher: another host and folder, the same last segment
    replay = run(project, "test_hooks.py", "--block-network", "--record-mode=none")
    assert "1 passed" in replay.stdout, replay.stdout + replay.stderr
