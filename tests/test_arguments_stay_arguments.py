"""Arguments stay arguments: path placeholders cannot climb the path or start a query, a
catalogue cannot hide a query in a path template, and a base URL on a link-local or cloud
metadata address needs an explicit opt-in."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from realprobe import Catalog, CatalogError, default_catalog
from realprobe.addresses import is_metadata_host, is_private_host


@pytest.fixture(scope="module")
def by_name() -> object:
    return default_catalog().get("restcountries_by_name")


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("..", "/v3.1/name/%2E%2E"),
        (".", "/v3.1/name/%2E"),
        ("a&b=c", "/v3.1/name/a%26b%3Dc"),
        ("x?y#z", "/v3.1/name/x%3Fy%23z"),
        ("../../admin", "/v3.1/name/..%2F..%2Fadmin"),
        ("Programming,Pun", "/v3.1/name/Programming,Pun"),
    ],
)
def test_path_placeholders_are_encoded(by_name: object, value: str, path: str) -> None:
    tool = by_name
    method, url, params = tool.build_request(tool.validate_args({"name": value}))  # type: ignore[attr-defined]
    assert params == {}
    sent = httpx.Request(method, url)  # what httpx would put on the wire
    assert sent.url.raw_path.decode() == path
    assert sent.url.host == "restcountries.com"


def _catalogue(tmp_path: Path, *, base_url: str, path: str = "/x", extra: str = "") -> Path:
    file = tmp_path / "c.toml"
    file.write_text(
        f"""
[[apis]]
id = "mine"
name = "Mine"
base_url = "{base_url}"
docs_url = "http://127.0.0.1/"
category = "Test"
https = false
{extra}
[[apis.tools]]
name = "mine_x"
title = "x"
description = "x"
path = "{path}"
[apis.tools.output.x]
description = "x"
"""
    )
    return file


@pytest.mark.parametrize("path", ["/search?q={q}", "/x?a=1", "/x#frag"])
def test_query_in_a_path_template_is_an_error_at_load(tmp_path: Path, path: str) -> None:
    with pytest.raises(CatalogError, match="query"):
        Catalog.load([_catalogue(tmp_path, base_url="http://127.0.0.1:1", path=path)])


@pytest.mark.parametrize(
    "base_url",
    [
        "http://169.254.169.254/latest",
        "http://169.254.1.2",
        "http://[fe80::1]/x",
        "http://metadata.google.internal/computeMetadata/v1",
        "http://[::ffff:169.254.169.254]/",
        "http://100.100.100.200/",
    ],
)
def test_metadata_base_urls_need_an_opt_in(tmp_path: Path, base_url: str) -> None:
    with pytest.raises(CatalogError, match="allow_link_local"):
        Catalog.load([_catalogue(tmp_path, base_url=base_url)])
    allowed = _catalogue(tmp_path, base_url=base_url, extra="allow_link_local = true")
    assert Catalog.load([allowed]).get("mine_x").api.allow_link_local


def test_loopback_and_public_base_urls_need_nothing(tmp_path: Path) -> None:
    for base in ("http://127.0.0.1:8765", "https://api.example.org/v1"):
        Catalog.load([_catalogue(tmp_path, base_url=base)])


def test_one_address_policy() -> None:
    for host in ("localhost", "printer.local", "db.internal", "10.0.0.1", "[::1]", "169.254.9.9"):
        assert is_private_host(host), host
    for host in ("example.org", "8.8.8.8", "[2606:4700::1111]"):
        assert not is_private_host(host), host
    assert is_metadata_host("169.254.169.254") and is_metadata_host("metadata.google.internal")
    assert not is_metadata_host("10.0.0.1") and not is_metadata_host("127.0.0.1")
