"""What keeps the page to the person who started it: requests must name this server in their Host
header (so a page elsewhere cannot read it through DNS rebinding), only GET and HEAD are served,
and every answer carries a Content-Security-Policy with no inline script.

An ASGI middleware of its own (not Starlette's `TrustedHostMiddleware`, whose refusal is a 400 and
whose wildcard rules are broader than needed here)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any, Final

CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS: Final = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
METHODS: Final = frozenset({"GET", "HEAD"})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(bound: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a request's Host may give: the bound address (`localhost` too on loopback) and
    each `--allow-host`, lowercase, IPv6 addresses without brackets."""
    names = {bound.strip("[]").lower(), *(name.strip().strip("[]").lower() for name in extra if name.strip())}
    if is_loopback(bound):
        names.add("localhost")
    return frozenset(names)


def host_name(header: str) -> str:
    """The name of a Host header, with or without its port (`[::1]:8765` -> `::1`)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    name, _, port = header.rpartition(":")
    return name if name and port.isdigit() else header


class Guard:
    """Refuses a request whose Host is not one of `hosts` (403) or whose method is not GET or HEAD
    (405); adds the security headers to every answer."""

    def __init__(self, app: Any, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        host = headers.get(b"host", b"").decode("latin-1")
        if not host or host_name(host) not in self.hosts:
            await _plain(send, 403, f"refused: Host {host!r} is not this server's address (see --allow-host)\n")
            return
        if scope["method"] not in METHODS:
            await _plain(send, 405, "only GET and HEAD are served\n", [(b"allow", b"GET, HEAD")])
            return

        async def secured(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, secured)


async def _plain(send: Any, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *(extra or []), *HEADERS]})
    await send({"type": "http.response.body", "body": body})
