"""The network block of the pytest plugins: a test may not reach hosts it was not allowed.

It refuses connects, UDP datagrams (`sendto`/`sendmsg`), sends on sockets that were connected
before the block began (a session fixture's keep-alive connection), and name resolution (a
DNS query would leave the process before any connect is refused). It cannot cover
subprocesses, nor C extensions that open their own sockets without Python's `socket` module.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any


class NetworkBlocked(OSError):
    """A test under a network block tried to reach a host it may not."""


LOOPBACK_NAMES = {"localhost": ("127.0.0.1", "::1")}


def _host_of(address: Any) -> str | None:
    if isinstance(address, tuple) and address:
        return str(address[0]).lower()
    return None  # a Unix socket path


def _numeric(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return False
    return True


class _Guard:
    """The socket-level block: connects, datagrams (`sendto`/`sendmsg`), sends on sockets
    connected before the block began, and name resolution (a lookup would leave the process
    before any connect is refused). Not covered: subprocesses and C extensions that open their
    own sockets (libcurl, database drivers), which never call Python's socket module."""

    def __init__(self, allowed: set[str], label: str) -> None:
        self.allowed = set(allowed)
        for name, addresses in LOOPBACK_NAMES.items():
            if name in self.allowed:
                self.allowed.update(addresses)
        self.label = label
        self.real: dict[str, Any] = {}

    def check(self, host: str | None, what: str) -> None:
        if host is None or host in self.allowed:
            return
        raise NetworkBlocked(
            f"network blocked by {self.label}: {what} {host} (allow the host, or record "
            "the cassette)"
        )

    def check_peer(self, sock: socket.socket) -> None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        try:
            peer = sock.getpeername()
        except OSError:
            return  # not connected: the call fails on its own
        self.check(_host_of(peer), "send to")

    def resolve_check(self, host: Any) -> None:
        if host is None:
            return
        name = host.decode("idna") if isinstance(host, bytes) else str(host)
        if not _numeric(name):
            self.check(name.lower(), "name lookup of")


def _patched(guard: _Guard) -> dict[str, Any]:
    """The replacements, keyed by socket.socket attribute (or `module.` for functions)."""
    real = guard.real

    def connect(self: socket.socket, address: Any) -> Any:
        guard.check(_host_of(address), "connect to")
        return real["connect"](self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        guard.check(_host_of(address), "connect to")
        return real["connect_ex"](self, address)

    def sendto(self: socket.socket, data: Any, *args: Any) -> Any:
        guard.check(_host_of(args[-1]) if args else None, "datagram to")
        return real["sendto"](self, data, *args)

    def sendmsg(self: socket.socket, buffers: Any, *args: Any) -> Any:
        if len(args) >= 3 and args[2] is not None:
            guard.check(_host_of(args[2]), "datagram to")
        else:
            guard.check_peer(self)
        return real["sendmsg"](self, buffers, *args)

    def send(self: socket.socket, *args: Any) -> Any:
        guard.check_peer(self)
        return real["send"](self, *args)

    def sendall(self: socket.socket, *args: Any) -> Any:
        guard.check_peer(self)
        return real["sendall"](self, *args)

    def getaddrinfo(host: Any, *args: Any, **kw: Any) -> Any:
        guard.resolve_check(host)
        return real["module.getaddrinfo"](host, *args, **kw)

    def gethostbyname(host: Any) -> Any:
        guard.resolve_check(host)
        return real["module.gethostbyname"](host)

    def gethostbyname_ex(host: Any) -> Any:
        guard.resolve_check(host)
        return real["module.gethostbyname_ex"](host)

    return {
        "connect": connect, "connect_ex": connect_ex, "sendto": sendto, "sendmsg": sendmsg,
        "send": send, "sendall": sendall, "module.getaddrinfo": getaddrinfo,
        "module.gethostbyname": gethostbyname, "module.gethostbyname_ex": gethostbyname_ex,
    }


def _owner(name: str) -> tuple[Any, str]:
    return (socket, name[7:]) if name.startswith("module.") else (socket.socket, name)


@contextlib.contextmanager
def blocked_network(allowed: set[str], label: str = "--realprobe-block-network") -> Iterator[None]:
    """Block the network for the block (see `_Guard`), then put everything back as found."""
    guard = _Guard(allowed, label)
    replacements = _patched(guard)
    for name in replacements:
        guard.real[name] = getattr(*_owner(name))
    try:
        for name, fn in replacements.items():
            setattr(*_owner(name), fn)
        yield
    finally:
        for name, fn in guard.real.items():
            setattr(*_owner(name), fn)
