"""Who a visitor is, for the limits one visitor may use: the address it connects from, which it
cannot mint at will, not Gradio's session hash, which the client chooses (one script
cycling 20 session hashes held every long-run seat).

- By default the socket's peer address. Behind a reverse proxy every visitor arrives from the
  proxy, so the operator lists the proxies in INFILL_TRUSTED_PROXIES (comma-separated addresses
  or networks, e.g. `127.0.0.1,10.0.0.0/8`): only a request whose peer is one of them is keyed on
  its X-Forwarded-For, read from the right, skipping the trusted hops (what a client writes
  further left is its own claim and is ignored).
- IPv6 addresses are grouped by /64: one host usually holds a whole /64 and can pick any address
  in it. An IPv4-mapped IPv6 address counts as its IPv4 address."""

from __future__ import annotations

import ipaddress
import os
from functools import lru_cache

UNKNOWN = "unknown"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _trusted(spec: str) -> tuple[Network, ...]:
    nets = []
    for part in spec.split(","):
        part = part.strip()
        if part:
            try:
                nets.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                continue  # a typo names no proxy: trusting nothing is the safe reading
    return tuple(nets)


def trusted_proxies() -> tuple[Network, ...]:
    """The proxies whose X-Forwarded-For is believed (INFILL_TRUSTED_PROXIES; none by default)."""
    return _trusted(os.environ.get("INFILL_TRUSTED_PROXIES", ""))


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def group(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """The key of an address: itself for IPv4, its /64 network for IPv6."""
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def address_key(peer: str | None, forwarded_for: str | None = None,
                trusted: tuple[Network, ...] | None = None) -> str:
    """The visitor's key from the socket's peer address and, when the peer is a trusted proxy, the
    X-Forwarded-For header (its rightmost address that is not a trusted proxy)."""
    trusted = trusted_proxies() if trusted is None else trusted
    ip = _ip(peer or "")
    if ip is None:
        return UNKNOWN
    if forwarded_for and any(ip in net for net in trusted):
        for hop in reversed(forwarded_for.split(",")):
            h = _ip(hop)
            if h is None:
                break  # a malformed hop: stop believing the chain at the last good proxy
            ip = h
            if not any(h in net for net in trusted):
                break
    return group(ip)


def _header(headers, name: str) -> str | None:
    try:
        return headers.get(name)
    except AttributeError:
        return None


def request_address(request) -> str:
    """The visitor key of a Gradio request (gr.Request; UNKNOWN without one: the library and tests)."""
    client = getattr(request, "client", None) if request is not None else None
    peer = getattr(client, "host", None)
    return address_key(peer, _header(getattr(request, "headers", None), "x-forwarded-for"))


def scope_address(scope: dict) -> str:
    """The visitor key of an ASGI scope (the request limits' middleware)."""
    client = scope.get("client") or (None, None)
    fwd = None
    for k, v in scope.get("headers", ()):
        if k == b"x-forwarded-for":
            fwd = v.decode("latin-1")
    return address_key(client[0], fwd)
