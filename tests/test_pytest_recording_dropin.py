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
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
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
    assert "pytest-recording is installed" in result.stdout


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
