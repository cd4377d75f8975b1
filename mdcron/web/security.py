"""The page can start commands, so it is guarded like a remote shell (issues 10 and 24):
  - every request needs a session or the token: a session cookie (`mdcron_session_<port>`,
    HttpOnly, SameSite=Strict, a random id opened by a one-time login code; sessions.py), or
    `Authorization: Bearer <token>` for scripts. The token never goes in a cookie or a URL;
  - the Host header must name this server (a foreign name is a DNS-rebinding attempt);
  - a state-changing request is a POST with the session's CSRF token (form field or
    X-CSRF-Token) and, from a browser, an Origin (or Referer) with this server's scheme, host
    and port;
  - a body is read only after all that, and only up to MAX_BODY bytes (counted as they arrive:
    a chunked body has no Content-Length to trust) within BODY_SECONDS;
  - strict response headers on every answer (CSP without inline script, no framing, no
    sniffing), errors included (SecureHeaders wraps the whole app).
A header value that is not ASCII is compared as bytes: a refusal, never a crash."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core.records import dataclass
from .sessions import Session, Sessions
from .token_file import load_token as load_token  # re-exported: server.py and older callers

SAFE = frozenset({"GET", "HEAD"})
MAX_BODY = 64 * 1024  # bytes of a request body; a comment is at most MAX_COMMENT characters
MAX_COMMENT = 10_000
BODY_SECONDS = 15.0  # a body that takes longer to arrive is refused (a slow-body client)
OPEN = ("/login",)  # answered without a session: the login page and its form
HEADERS = [
    (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self';"
     b" img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Caller:
    """Who sent a request that got through: a browser session, or a script with the token."""

    via: str  # "web" (a session) or "api" (the Bearer token)
    session: str | None  # the session's label (8 hex digits), never its id
    csrf: str | None  # the session's CSRF token (None for the token: nothing ambient)
    remote: str


def cookie_name(port: int) -> str:
    """One cookie per port: two dashboards on one machine do not log each other out."""
    return f"mdcron_session_{port}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def same(given: str, expected: str) -> bool:
    """A constant-time comparison that takes any text (hmac refuses non-ASCII str)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8", "surrogatepass"))


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def origin_of(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an Origin or Referer; None when it is not one."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


class SecureHeaders:
    """The outermost layer: every answer carries HEADERS, even a crash's 500."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = list(message.get("headers", [])) + [
                    h for h in HEADERS if h[0] not in names]
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Guard:
    """ASGI middleware: Host allow-list, session or token, CSRF and Origin checks, the body
    limit. A request that gets through carries its Caller in scope["state"]["caller"]."""

    def __init__(self, app: ASGIApp, token: str, hosts: set[str], sessions: Sessions,
                 cookie: str, login_page: Callable[[str, int], Response]):
        self.app = app
        self.token = token
        self.hosts = {h.lower() for h in hosts}
        self.sessions = sessions
        self.cookie = cookie
        self.login_page = login_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            refusal = self.check(scope)
        except Exception:  # a header no rule foresaw: refused, never a traceback
            refusal = _error(scope["path"].startswith("/api/"), 400, "bad request headers")
        if refusal is not None:
            if scope["method"] not in SAFE:
                refusal.headers["connection"] = "close"  # its body is not read: not kept
            await refusal(scope, receive, send)
            return
        if scope["method"] not in SAFE:
            body = await _read_body(scope, receive)
            if isinstance(body, Response):
                body.headers["connection"] = "close"  # the rest is not read, nor waited for
                await body(scope, receive, send)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    def check(self, scope: Scope) -> Response | None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        path, method = scope["path"], scope["method"]
        api = path.startswith("/api/")
        state = scope.setdefault("state", {})
        host = headers.get("host", "")
        if _host_name(host) not in self.hosts:
            return _error(api, 421, "unknown Host header: open the page by the address"
                          " `scheduler.py web` printed (or add --allow-host)")
        if "token" in QueryParams(scope.get("query_string", b"").decode("latin-1")):
            return _error(api, 400, "the access token never goes in the address (it would stay"
                          " in the browser's history): open the login link `scheduler.py web`"
                          " printed, or /login, or send Authorization: Bearer <token>")
        if path.startswith("/static/") and method in SAFE:
            return None  # the stylesheet and the script: nothing secret
        remote = (scope.get("client") or ("", 0))[0] or ""
        caller = self._caller(headers, remote)
        if path in OPEN:
            if method not in SAFE and not self._same_origin(scope, headers):
                return _error(False, 403, "cross-origin request refused")
            state["caller"] = caller
            return None
        if caller is None:
            if api:
                return _error(True, 401, "send Authorization: Bearer <token> (the token file"
                              " `scheduler.py web` named), or log in at /login")
            return self.login_page("Log in with the link `scheduler.py web` printed, or with"
                                   " the access token.", 401)
        state["caller"] = caller
        if method in SAFE or caller.via == "api":
            return None  # a script with the token: no ambient credential to forge
        if not self._same_origin(scope, headers):
            return _error(api, 403, "cross-origin request refused")
        sent = headers.get("x-csrf-token")
        if sent is not None and not same(sent, caller.csrf or ""):
            return _error(api, 403, "bad CSRF token: reload the page")
        if sent is None:
            state["csrf_form"] = True  # the route checks the form's field
        return None

    def _caller(self, headers: dict[str, str], remote: str) -> Caller | None:
        bearer = headers.get("authorization", "")
        if bearer[:7].lower() == "bearer " and same(bearer[7:].strip(), self.token):
            return Caller("api", None, None, remote)
        for value in _cookies(headers.get("cookie", ""), self.cookie):
            session = self.sessions.find(value)
            if session is not None:
                return session_caller(session, remote)
        return None

    def _same_origin(self, scope: Scope, headers: dict[str, str]) -> bool:
        """Origin (or Referer) names exactly this server: scheme, host and port."""
        sent = origin_of(headers.get("origin") or headers.get("referer") or "")
        here = origin_of(f"{scope.get('scheme', 'http')}://{headers.get('host', '')}")
        return sent is not None and sent == here


def session_caller(session: Session, remote: str) -> Caller:
    return Caller("web", session.label, session.csrf, remote)


def caller_of(request: Request) -> Caller | None:
    """The Caller the guard let through (None on the open pages: login, static)."""
    return request.scope.get("state", {}).get("caller")


def _cookies(header: str, name: str) -> list[str]:
    """Every value the Cookie header gives `name` (a browser may send two)."""
    out = []
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            out.append(value.strip('"'))
    return out


async def _read_body(scope: Scope, receive: Receive) -> bytes | Response:
    """The whole body, counted as it arrives: 413 past MAX_BODY, 408 past BODY_SECONDS."""
    api = scope["path"].startswith("/api/")
    for name, value in scope["headers"]:
        if name == b"content-length" and (not value.isdigit() or int(value) > MAX_BODY):
            return _error(api, 413, f"request body too large (at most {MAX_BODY} bytes)")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_SECONDS):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    break
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > MAX_BODY:
                    return _error(api, 413, f"request body too large (at most {MAX_BODY}"
                                  " bytes)")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        return _error(api, 408, f"the request body took over {BODY_SECONDS:.0f} s to arrive")
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def _error(api: bool, status: int, message: str) -> Response:
    if api:
        return JSONResponse({"error": message}, status_code=status)
    return PlainTextResponse(message + "\n", status_code=status)


def allowed_hosts(bind: str, extra: list[str]) -> set[str]:
    names = {"127.0.0.1", "localhost", "[::1]", *(e.lower() for e in extra)}
    if bind not in ("0.0.0.0", "::", ""):
        names.add(f"[{bind}]" if ":" in bind else bind)
    return names
