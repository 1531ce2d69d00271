"""The network block of the pytest plugins: a test may not reach hosts it was not allowed.

It refuses connects, UDP datagrams (`sendto`/`sendmsg`), sends on sockets that were connected
before the block began (a session fixture's keep-alive connection: `send`, `sendall`,
`sendfile`, also through TLS, and `os.write`/`os.writev`/`os.sendfile` on the socket's file
descriptor), and name resolution both ways (a DNS query, or the PTR query of `gethostbyaddr`
and `getnameinfo`, would leave the process before any connect is refused).

What stays outside: subprocesses; C extensions that open or write to sockets without going
through Python's `socket`, `ssl` or `os` functions (libcurl, database drivers, uvloop); and
code that kept a reference to one of these functions from before the block began (`from os
import write`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import stat
from collections.abc import Callable, Iterable, Iterator
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
    """The checks behind the block (what it covers and what stays outside: the module
    docstring)."""

    def __init__(self, allowed: Iterable[Any] | str, label: str) -> None:
        hosts = allowed.split(",") if isinstance(allowed, str) else allowed
        self.allowed = {str(h).strip().lower() for h in hosts if str(h).strip()}
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

    def check_fd(self, fd: Any) -> None:
        """A write to a raw file descriptor that is a connected socket."""
        try:
            if not isinstance(fd, int) or not stat.S_ISSOCK(os.fstat(fd).st_mode):
                return
        except OSError:
            return
        sock = socket.socket(fileno=fd)
        try:
            self.check_peer(sock)
        finally:
            sock.detach()

    def reverse_check(self, address: Any) -> None:
        """A reverse lookup (PTR query) of an address that is not allowed."""
        host = _host_of(address) if isinstance(address, tuple) else str(address).lower()
        self.check(host, "reverse lookup of")

    def resolve_check(self, host: Any) -> None:
        if host is None:
            return
        name = host.decode("idna") if isinstance(host, bytes) else str(host)
        if not _numeric(name):
            self.check(name.lower(), "name lookup of")


def _patched(guard: _Guard) -> dict[str, Any]:
    """The replacements, keyed as `_owner` reads the names: each runs its check, then the
    function it replaces."""

    def peer(sock: Any, *_: Any, **__: Any) -> None:
        guard.check_peer(sock)

    def connect(_: Any, address: Any, *__: Any) -> None:
        guard.check(_host_of(address), "connect to")

    def sendto(_: Any, __: Any, *args: Any, **___: Any) -> None:
        guard.check(_host_of(args[-1]) if args else None, "datagram to")

    def sendmsg(sock: Any, _: Any, *args: Any, **__: Any) -> None:
        if len(args) >= 3 and args[2] is not None:
            guard.check(_host_of(args[2]), "datagram to")
        else:
            guard.check_peer(sock)

    def on_fd(descriptor: Any, *_: Any, **__: Any) -> None:
        guard.check_fd(descriptor)

    def reverse(address: Any, *_: Any) -> None:
        guard.reverse_check(address)

    def lookup(host: Any, *_: Any, **__: Any) -> None:
        guard.resolve_check(host)

    checks: dict[str, Callable[..., None]] = {
        "connect": connect, "connect_ex": connect, "sendto": sendto, "sendmsg": sendmsg,
        "send": peer, "sendall": peer, "sendfile": peer, "ssl.send": peer, "ssl.sendall": peer,
        "ssl.sendfile": peer, "os.write": on_fd, "os.writev": on_fd, "os.sendfile": on_fd,
        "module.getaddrinfo": lookup, "module.gethostbyname": lookup,
        "module.gethostbyname_ex": lookup, "module.gethostbyaddr": reverse,
        "module.getnameinfo": reverse,
    }
    return {name: _checked(guard.real, name, check) for name, check in checks.items()}


def _checked(real: dict[str, Any], name: str, check: Callable[..., None]) -> Any:
    def replacement(*args: Any, **kw: Any) -> Any:
        check(*args, **kw)
        return real[name](*args, **kw)

    return replacement


_OWNERS = {"module": socket, "ssl": ssl.SSLSocket, "os": os}


def _owner(name: str) -> tuple[Any, str]:
    prefix, dot, attr = name.partition(".")
    return (_OWNERS[prefix], attr) if dot else (socket.socket, name)


@contextlib.contextmanager
def blocked_network(allowed: Iterable[Any] | str,
                    label: str = "--realprobe-block-network") -> Iterator[None]:
    """Block the network for the block (see `_Guard`) but to the `allowed` hosts (or a
    comma-separated list of them), then put everything back as found."""
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
