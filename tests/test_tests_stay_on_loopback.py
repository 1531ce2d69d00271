"""The suite's own guard: a test that reaches beyond loopback is refused at once and fails."""

from __future__ import annotations

import errno
import socket

import pytest
from conftest import _beyond_loopback


@pytest.mark.parametrize(("address", "beyond"), [
    (("127.0.0.1", 80), False), (("127.8.9.1", 80), False), (("::1", 80, 0, 0), False),
    (("localhost", 80), False), ("/tmp/x.sock", False), (("192.0.2.1", 80), True),
    (("2001:db8::1", 80, 0, 0), True), (("dog.ceo", 443), True), (("10.0.0.1", 80), True),
])
def test_the_guard_knows_loopback(address: object, beyond: bool) -> None:
    assert _beyond_loopback(address) is beyond


def test_a_connection_beyond_loopback_is_refused_and_recorded(
        _loopback_guard: list[object]) -> None:
    with socket.socket() as s, pytest.raises(OSError) as err:
        s.connect(("192.0.2.1", 9))
    assert err.value.errno == errno.ENETUNREACH
    with socket.socket() as s:
        assert s.connect_ex(("192.0.2.1", 9)) == errno.ENETUNREACH
    assert _loopback_guard == [("192.0.2.1", 9), ("192.0.2.1", 9)]
    _loopback_guard.clear()  # recorded on purpose here: the guard's teardown would fail it
