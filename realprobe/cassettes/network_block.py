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

    # each check below takes the arguments of the functions it stands before (see `_patched`)

    def peer(self, sock: Any, *_: Any, **__: Any) -> None:
        """A send on a connected socket."""
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        try:
            peer = sock.getpeername()
        except OSError:
            return  # not connected: the call fails on its own
        self.check(_host_of(peer), "send to")

    def connect(self, _: Any, address: Any, *__: Any) -> None:
        self.check(_host_of(address), "connect to")

    def sendto(self, _: Any, __: Any, *args: Any, **___: Any) -> None:
        self.check(_host_of(args[-1]) if args else None, "datagram to")

    def sendmsg(self, sock: Any, _: Any, *args: Any, **__: Any) -> None:
        if len(args) >= 3 and args[2] is not None:
            self.check(_host_of(args[2]), "datagram to")
        else:
            self.peer(sock)

    def on_fd(self, fd: Any, *_: Any, **__: Any) -> None:
        """A write to a raw file descriptor that is a connected socket."""
        try:
            if not isinstance(fd, int) or not stat.S_ISSOCK(os.fstat(fd).st_mode):
                return
        except OSError:
            return
        sock = socket.socket(fileno=fd)
        try:
            self.peer(sock)
        finally:
            sock.detach()

    def reverse(self, address: Any, *_: Any) -> None:
        """A reverse lookup (PTR query) of an address that is not allowed."""
        host = _host_of(address) if isinstance(address, tuple) else str(address).lower()
        self.check(host, "reverse lookup of")

    def lookup(self, host: Any, *_: Any, **__: Any) -> None:
        if host is None:
            return
        name = host.decode("idna") if isinstance(host, bytes) else str(host)
        if not _numeric(name):
            self.check(name.lower(), "name lookup of")


def _patched(g: _Guard) -> dict[str, Any]:
    """The replacements, keyed as `_owner` reads the names: each runs its check of the guard
    `g`, then the function it replaces."""
    checks: dict[str, Callable[..., None]] = {
        "connect": g.connect, "connect_ex": g.connect, "sendto": g.sendto, "sendmsg": g.sendmsg,
        "send": g.peer, "sendall": g.peer, "sendfile": g.peer, "ssl.send": g.peer,
        "ssl.sendall": g.peer, "ssl.sendfile": g.peer, "os.write": g.on_fd,
        "os.writev": g.on_fd, "os.sendfile": g.on_fd, "module.getaddrinfo": g.lookup,
        "module.gethostbyname": g.lookup, "module.gethostbyname_ex": g.lookup,
        "module.gethostbyaddr": g.reverse, "module.getnameinfo": g.reverse,
    }
    return {name: _checked(g.real, name, check) for name, check in checks.items()}


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
