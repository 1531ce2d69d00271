import socket

import httpx
import pytest
import requests

API = "https://api.example.test"


@pytest.mark.vcr
def test_get_user():
    r = requests.get(f"{API}/users/1", headers={"Authorization": "Bearer not-in-the-cassette"})
    assert r.status_code == 200 and r.json()["name"] == "Ada"


class TestUsers:
    @pytest.mark.vcr
    def test_list(self):
        r = httpx.get(f"{API}/users", params={"page": 2})
        assert [u["id"] for u in r.json()] == [3, 4]


@pytest.mark.vcr("shared/common.yaml")
def test_two_cassettes():
    assert requests.get(f"{API}/users/1").json()["name"] == "Ada"
    assert httpx.get(f"{API}/status").json() == {"ok": True}


@pytest.mark.vcr(default_cassette="renamed.yaml")
def test_custom_name():
    assert httpx.get(f"{API}/status").json() == {"ok": True}


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.vcr
def test_param(n):
    assert requests.get(f"{API}/users/{n}").status_code == 200


@pytest.mark.vcr
def test_no_request_needs_no_cassette():
    assert 1 + 1 == 2


@pytest.mark.vcr
def test_vcr_fixture(vcr):
    requests.get(f"{API}/users/1")
    assert vcr.play_count == 1 and vcr.all_played and len(vcr) == 1


@pytest.mark.block_network
def test_block_network_marker():
    with pytest.raises(OSError):
        socket.create_connection(("localhost", 9), timeout=1)


@pytest.mark.block_network(allowed_hosts=["127.0.0.1"])
def test_allowed_hosts():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname(), timeout=5)
    client.close()
    server.close()
