"""The one address policy: which hosts are not the public internet.

Used by the client (redirects may not lead to a non-public address unless the tool itself
lives on one) and by catalogue loading (a base URL on a link-local or cloud metadata address
needs an explicit opt-in). Works on literal addresses and well-known names only; resolving
names is the client's job (its injectable resolver feeds the answers back through here).
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

#: names that are never public: loopback, mDNS and private-DNS suffixes
PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".lan")
PRIVATE_NAMES = frozenset({"localhost"})

#: cloud instance-metadata endpoints: a request there can hand out credentials
METADATA_NAMES = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
    }
)
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
        ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
        ipaddress.ip_address("fd00:ec2::254"),  # AWS IPv6
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    }
)


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host written as one stands for (`[::1]`, `10.0.0.1`); None for a name."""
    h = host.strip("[]").split("%")[0]
    try:
        return ipaddress.ip_address(h)
    except ValueError:
        return None


def _name(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


def is_private_host(host: str) -> bool:
    """Loopback, private, link-local or otherwise non-global literal addresses, localhost and
    names under a private suffix (`.local`, `.internal`, ...)."""
    addr = ip_literal(host)
    if addr is not None:
        return not addr.is_global
    name = _name(host)
    return name in PRIVATE_NAMES or name.endswith(PRIVATE_SUFFIXES) or is_metadata_host(name)


def is_metadata_host(host: str) -> bool:
    """A link-local address (169.254.0.0/16, fe80::/10) or a cloud metadata name/address."""
    addr = ip_literal(host)
    if addr is not None:
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        return addr.is_link_local or addr in METADATA_ADDRESSES
    return _name(host) in METADATA_NAMES


def host_of(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


@functools.lru_cache(maxsize=1024)
def is_private_url(url: str) -> bool:
    # asked once per call with the API's base URL: parsed once per URL, not per call
    return is_private_host(host_of(url))


def is_metadata_url(url: str) -> bool:
    return is_metadata_host(host_of(url))
