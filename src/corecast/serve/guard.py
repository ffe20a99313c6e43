"""Who the dashboard obeys: its owner only (docs/serve.md, "Safety").

- **The owner's secret.** The server makes a random secret at start and prints it on its own
  terminal only, in the address to open (`http://127.0.0.1:8765/?token=SECRET`, as Jupyter
  does). A request carrying it -- in that address, in the cookie the first visit sets
  (`corecast-serve-PORT`: HttpOnly, SameSite=Strict, for the session), or as
  `Authorization: token SECRET` for a script -- is the owner's; any other request, the page
  itself included, is answered 403. Another user of the machine can reach the port, but
  never reads the page, the files' documents or a live stream, and never starts anything.
  The first visit with the secret in the address is sent on to `/` (it leaves the address
  bar).
- **Its own Host.** Only requests whose Host is the server's are answered, on every address
  it may listen on (meters.httpd.host_allowed; 421 otherwise): a page elsewhere cannot reach
  it through DNS rebinding.
- **The page's token.** An action that starts or stops something (POST) must also carry the
  token written into the page (`X-Corecast-Token`, which a page of another site cannot read)
  and, when the browser says where it comes from, come from the server's own origin: the
  owner's cookie alone never lets another site act through the browser.
"""
from __future__ import annotations

import logging
import secrets
from typing import Any, Callable

from aiohttp import web

log = logging.getLogger("corecast.serve")
QUERY = "token"          # ?token=SECRET


def same(given: str | None, secret: str) -> bool:
    return bool(given) and secrets.compare_digest(given.encode(), secret.encode())  # type: ignore[union-attr]


class Guard:
    """The checks of every request to a dashboard listening on `dash.host`:`dash.port`."""

    def __init__(self, dash: Any):
        self.dash = dash
        self.secret = secrets.token_urlsafe(32)     # the owner's: printed on the terminal only
        self.token = secrets.token_urlsafe(24)      # the page's, for its POSTs (never the secret)

    @property
    def cookie_name(self) -> str:
        return f"corecast-serve-{self.dash.port}"   # cookies are per host, not per port: one per server

    def url(self, shown_host: str | None = None) -> str:
        """The address to open: with the secret, which the first visit turns into a cookie."""
        host = self.dash.host
        shown = shown_host or (f"[{host}]" if ":" in host else host)
        return f"http://{shown}:{self.dash.port}/?{QUERY}={self.secret}"

    def owner(self, request: web.Request) -> tuple[bool, bool]:
        """(the request carries the owner's secret, it came in the address, not the cookie)."""
        if same(request.cookies.get(self.cookie_name), self.secret):
            return True, False
        auth = request.headers.get("Authorization", "")
        if auth[:6].lower() == "token " and same(auth[6:].strip(), self.secret):
            return True, False
        return same(request.query.get(QUERY), self.secret), True

    @web.middleware
    async def middleware(self, request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
        from ..meters.httpd import host_allowed
        d = self.dash
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        if not host_allowed(request.headers.get("Host"), d.host, d.port, sock[0] if sock else None):
            log.warning("refused a request for host %r", request.headers.get("Host"))
            return web.json_response({"error": f"this server answers for {d.host}:{d.port} only"}, status=421)
        owner, by_query = self.owner(request)
        if not owner:
            log.warning("refused %s %s: no owner's token or cookie", request.method, request.path)
            return web.json_response({"error": "corecast serve answers its owner only: open the address it "
                                               "printed on its terminal (with ?token=...)"}, status=403)
        if request.method not in ("GET", "HEAD"):
            origin = request.headers.get("Origin")
            if origin is not None and origin != f"http://{request.host}":
                log.warning("refused %s %s from origin %r", request.method, request.path, origin)
                return web.json_response({"error": f"a request from another origin ({origin})"}, status=403)
            if not same(request.headers.get("X-Corecast-Token"), self.token):
                return web.json_response({"error": "missing or wrong page token (reload the page)"}, status=403)
        if by_query and request.method == "GET" and request.path == "/":
            resp: web.StreamResponse = web.Response(status=302, headers={"Location": "/"})
        else:
            resp = await handler(request)
        if by_query and not resp.prepared:
            resp.set_cookie(self.cookie_name, self.secret, httponly=True, samesite="Strict", path="/")
        return resp
