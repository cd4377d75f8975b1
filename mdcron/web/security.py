"""The page can start commands, so it is guarded like a remote shell:
  - every request needs the access token: a cookie (HttpOnly, SameSite=Strict) set from a
    one-time `?token=`, or `Authorization: Bearer` for scripts;
  - the Host header must name this server (a foreign name is a DNS-rebinding attempt);
  - a state-changing request is a POST with the CSRF token (form field or X-CSRF-Token) and,
    from a browser, an Origin (or Referer) naming this server;
  - strict response headers (CSP without inline script, no framing, no sniffing)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from starlette.datastructures import URL, QueryParams
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ..core import safe_fs
from ..core.private_files import open_private

COOKIE = "mdcron_token"
SAFE = frozenset({"GET", "HEAD"})
HEADERS = [
    (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self';"
     b" img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_token(path: Path, root: Path | None = None) -> str:
    """The token in `path`, created (mode 0600, owner only) when missing. With `root` (the
    home, for the default state/web-token) the folders are walked from it without following a
    symlink; a --token-file of the user's own choosing is taken where it resolves."""
    if root is None:
        path = Path(os.path.realpath(path))
    try:
        token = safe_fs.read_regular(path, 4096, root=root).decode("utf-8").strip()
        if token:
            return token
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, root=root)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode("utf-8"))
    finally:
        os.close(fd)
    return token


def csrf_for(token: str) -> str:
    """Derived, not stored: a page can carry it without carrying the access token."""
    return hmac.new(token.encode(), b"mdcron-csrf", hashlib.sha256).hexdigest()


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Guard:
    """ASGI middleware: Host allow-list, token, CSRF and Origin checks, headers."""

    def __init__(self, app: ASGIApp, token: str, hosts: set[str]):
        self.app = app
        self.token = token
        self.csrf = csrf_for(token)
        self.hosts = {h.lower() for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + HEADERS
            await send(message)

        refusal = self.check(scope)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        scope.setdefault("state", {})["csrf"] = self.csrf
        await self.app(scope, receive, send_with_headers)

    def check(self, scope: Scope) -> Response | None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        path = scope["path"]
        api = path.startswith("/api/")
        if _host_name(headers.get("host", "")) not in self.hosts:
            return _error(api, 421, "unknown Host header: open the page by the address"
                          " `scheduler.py web` printed (or add --allow-host)")
        cookie_ok = hmac.compare_digest(_cookie(headers.get("cookie", "")), self.token)
        bearer = headers.get("authorization", "")
        bearer_ok = bearer.startswith("Bearer ") and hmac.compare_digest(bearer[7:].strip(),
                                                                         self.token)
        url = URL(scope=scope)
        params = QueryParams(scope.get("query_string", b"").decode("latin-1"))
        given = params.get("token")
        if given is not None and scope["method"] in SAFE:
            if not hmac.compare_digest(given, self.token):
                return _error(api, 401, "wrong token: see the token file in the state folder")
            # the token leaves the address bar (and history) at once; the cookie carries it
            rest = [(k, v) for k, v in params.multi_items() if k != "token"]
            target = path + ("?" + urlencode(rest) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict",
                                path="/", secure=url.scheme == "https")
            return response
        if path.startswith("/static/") and scope["method"] in SAFE:
            return None  # the stylesheet and the script: nothing secret
        if not (cookie_ok or bearer_ok):
            return _error(api, 401, "this page needs its access token: open the URL"
                          " `scheduler.py web` printed (…?token=…), or send"
                          " Authorization: Bearer <token>")
        if scope["method"] in SAFE:
            return None
        if bearer_ok and not cookie_ok:
            return None  # a script with the token: no ambient credential to forge
        origin = headers.get("origin") or headers.get("referer")
        if not origin or _host_name(urlsplit(origin).netloc) not in self.hosts:
            return _error(api, 403, "cross-origin request refused")
        sent = headers.get("x-csrf-token")
        if sent is not None and not hmac.compare_digest(sent, self.csrf):
            return _error(api, 403, "bad CSRF token: reload the page")
        if sent is None:
            scope.setdefault("state", {})["csrf_form"] = True  # the route checks the field
        return None


def _cookie(header: str) -> str:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value.strip('"')
    return ""


def _error(api: bool, status: int, message: str) -> Response:
    if api:
        return JSONResponse({"error": message}, status_code=status)
    return PlainTextResponse(message + "\n", status_code=status)


def allowed_hosts(bind: str, extra: list[str]) -> set[str]:
    names = {"127.0.0.1", "localhost", "[::1]", *(e.lower() for e in extra)}
    if bind not in ("0.0.0.0", "::", ""):
        names.add(f"[{bind}]" if ":" in bind else bind)
    return names
