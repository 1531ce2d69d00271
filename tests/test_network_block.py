"""The pytest network block, tried the way a test suite leaks: UDP datagrams (`sendto`,
`sendmsg`), name lookups (which leave the process before any connect), and sockets connected
before the block began. Every target is on loopback, which the block does not allow here."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from realprobe.cassettes.network_block import NetworkBlocked, blocked_network


@pytest.fixture
def udp_sink() -> Iterator[socket.socket]:
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    sink.settimeout(0.2)
    yield sink
    sink.close()


def _received(sink: socket.socket) -> bytes | None:
    try:
        return sink.recv(64)
    except TimeoutError:
        return None


def test_udp_sendto_is_blocked(udp_sink: socket.socket) -> None:
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with blocked_network(set()), pytest.raises(NetworkBlocked, match=r"datagram to 127\.0\.0\.1"):
        sender.sendto(b"leak", udp_sink.getsockname())
    with blocked_network(set()), pytest.raises(NetworkBlocked):
        sender.sendto(b"leak", 0, udp_sink.getsockname())
    assert _received(udp_sink) is None
    sender.close()


def test_udp_sendmsg_is_blocked(udp_sink: socket.socket) -> None:
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with blocked_network(set()), pytest.raises(NetworkBlocked):
        sender.sendmsg([b"leak"], [], 0, udp_sink.getsockname())
    sender.connect(udp_sink.getsockname())  # connected before the block
    with blocked_network(set()), pytest.raises(NetworkBlocked):
        sender.sendmsg([b"leak"])
    assert _received(udp_sink) is None
    sender.close()


def test_name_lookups_are_blocked_before_they_leave() -> None:
    with blocked_network(set()):
        with pytest.raises(NetworkBlocked, match="name lookup of localhost"):
            socket.getaddrinfo("localhost", 80)
        with pytest.raises(NetworkBlocked):
            socket.gethostbyname("localhost")
        with pytest.raises(NetworkBlocked):
            socket.create_connection(("localhost", 9), timeout=1)
        # a numeric address needs no lookup; its connect is what gets refused
        assert socket.getaddrinfo("127.0.0.1", 80, type=socket.SOCK_STREAM)


def test_a_socket_connected_before_the_block_cannot_send() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname(), timeout=5)
    peer, _ = server.accept()
    peer.settimeout(0.2)
    try:
        with blocked_network(set()):
            with pytest.raises(NetworkBlocked, match=r"send to 127\.0\.0\.1"):
                client.sendall(b"leak")
            with pytest.raises(NetworkBlocked):
                client.send(b"leak")
        with pytest.raises(TimeoutError):
            peer.recv(16)
        client.sendall(b"ok")  # everything is put back afterwards
        assert peer.recv(16) == b"ok"
    finally:
        for s in (client, peer, server):
            s.close()


def test_allowed_hosts_pass_and_localhost_covers_its_addresses(udp_sink: socket.socket) -> None:
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    before = socket.socket.connect
    with blocked_network({"localhost"}):
        assert socket.getaddrinfo("localhost", 80)
        sender.sendto(b"fine", udp_sink.getsockname())
    assert _received(udp_sink) == b"fine"
    sender.close()
    assert socket.socket.connect is before  # put back as it was


def test_reverse_lookups_are_blocked() -> None:
    with blocked_network(set()):
        with pytest.raises(NetworkBlocked, match=r"reverse lookup of 127\.0\.0\.2"):
            socket.gethostbyaddr("127.0.0.2")
        with pytest.raises(NetworkBlocked, match="reverse lookup"):
            socket.getnameinfo(("127.0.0.2", 80), 0)
    with blocked_network({"127.0.0.2"}):
        socket.getnameinfo(("127.0.0.2", 80), socket.NI_NUMERICHOST)  # allowed: no error


@pytest.fixture
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname(), timeout=5)
    peer, _ = server.accept()
    peer.settimeout(0.2)
    yield client, peer
    for s in (client, peer, server):
        s.close()


def test_a_socket_opened_before_the_block_cannot_write_around_it(
    tcp_pair: tuple[socket.socket, socket.socket], tmp_path: object, udp_sink: socket.socket
) -> None:
    import os
    from pathlib import Path

    client, peer = tcp_pair
    payload = Path(str(tmp_path)) / "payload"
    payload.write_bytes(b"leak")
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.connect(udp_sink.getsockname())
    with blocked_network(set()), payload.open("rb") as f:
        for leak in (
            lambda: client.sendfile(f),
            lambda: os.write(client.fileno(), b"leak"),
            lambda: os.writev(client.fileno(), [b"leak"]),
            lambda: os.sendfile(client.fileno(), f.fileno(), 0, 4),
            lambda: os.write(udp.fileno(), b"leak"),
        ):
            with pytest.raises(NetworkBlocked, match=r"send to 127\.0\.0\.1"):
                leak()
        fd = os.open(os.devnull, os.O_WRONLY)
        os.write(fd, b"files are not sockets")
        os.close(fd)
    assert _received(peer) is None and _received(udp_sink) is None
    os.write(client.fileno(), b"after")  # put back as found once the block ends
    assert peer.recv(16) == b"after"
    udp.close()


def test_a_tls_connection_opened_before_the_block_cannot_send(tmp_path: object) -> None:
    import ssl
    from pathlib import Path

    from tests.tls_helpers import tls_server

    with tls_server(Path(str(tmp_path))) as server:
        ctx = ssl.create_default_context(cafile=str(server.cert_file))
        port = int(server.url.rsplit(":", 1)[1])
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        tls = ctx.wrap_socket(raw, server_hostname="localhost")  # handshake done before
        request = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
        with blocked_network(set()):
            for leak in (lambda: tls.send(request), lambda: tls.sendall(request)):
                with pytest.raises(NetworkBlocked, match=r"send to 127\.0\.0\.1"):
                    leak()
        tls.sendall(request)  # after the block: as before
        assert tls.recv(64).startswith(b"HTTP/1.1 200")
        tls.close()
