"""Issue 28: the dashboard's guard (web/security.py) request by request, in process: the real
Guard and SecureHeaders around a small ASGI app that shows what got through (the caller, the
body, the CSRF flag). Each test is an answer a browser, a script or an attacker would get: the
Host allow-list, the token in the address, the session or the token, Origin and CSRF, the body
limits, the headers on every answer; and the public helpers the server uses (the cookie name,
the loopback test, the allowed hosts, the origin parser, the constant-time comparison)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from mdcron.core.records import asdict
from mdcron.web import security
from mdcron.web.security import (
    MAX_BODY,
    Guard,
    SecureHeaders,
    allowed_hosts,
    caller_of,
    cookie_name,
    is_loopback,
    origin_of,
    same,
)
from mdcron.web.sessions import Sessions

TOKEN = "T" * 43
HOST = "127.0.0.1:8765"
HERE = "http://127.0.0.1:8765"
COOKIE = "mdcron_session_8765"


# ------------------------------------------------------------------------ the harness


async def echo(scope, receive, send) -> None:
    """The app behind the guard: what it was let through with, as JSON."""
    if scope["type"] == "lifespan":  # the server's start: answered through both layers
        message = await receive()
        await send({"type": message["type"] + ".complete"})
        return
    request = Request(scope, receive)
    body = await request.body() if scope["method"] != "GET" else b""
    caller = caller_of(request)
    payload = {"caller": asdict(caller) if caller else None, "body": body.decode("latin-1"),
               "csrf_form": bool(scope.get("state", {}).get("csrf_form"))}
    if scope["path"] == "/after":  # what the server says once the body was read: it left
        payload["after"] = (await receive())["type"]
    headers = [(b"content-type", b"application/json")]
    if scope["path"] == "/own-cache":
        headers.append((b"Cache-Control", b"max-age=5"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})


def login_page(message: str, status: int) -> Response:
    return PlainTextResponse("LOGIN PAGE: " + message, status_code=status)


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name]

    @property
    def seen(self) -> dict:
        """What the app behind the guard saw (the request got through)."""
        assert self.status == 200, (self.status, self.body)
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


@dataclass
class Dashboard:
    sessions: Sessions
    app: object

    def login(self) -> tuple[str, str]:
        """(cookie header value, CSRF token) of a new session."""
        sid, session = self.sessions.open("127.0.0.1", "test")
        return f"{COOKIE}={sid}", session.csrf

    def request(self, method: str = "GET", path: str = "/", headers: dict | None = None,
                raw_headers: list[tuple[bytes, bytes]] | None = None, query: bytes | None = b"",
                body: list[dict] | None = None, client=("10.1.2.3", 5000),
                scheme: str | None = "http", host: str | None = HOST) -> Answer:
        """One request; scheme or query None: left out of the scope (ASGI's defaults apply)."""
        pairs = [] if host is None else [(b"host", host.encode())]
        pairs += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
        pairs += raw_headers or []
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": method, "scheme": scheme, "path": path, "raw_path": path.encode(),
                 "query_string": query, "root_path": "", "headers": pairs, "client": client,
                 "server": ("127.0.0.1", 8765)}
        for key, value in (("scheme", scheme), ("query_string", query)):
            if value is None:
                del scope[key]
        messages = list(body if body is not None else
                        [{"type": "http.request", "body": b"", "more_body": False}])

        async def receive() -> dict:
            if not messages:
                raise AssertionError("the guard read past the end of the request")
            return messages.pop(0)

        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        asyncio.run(self.app(scope, receive, send))
        start = sent[0]
        assert start["type"] == "http.response.start"
        headers_out = [(k.decode(), v.decode()) for k, v in start.get("headers", [])]
        return Answer(start["status"], headers_out,
                      b"".join(m.get("body", b"") for m in sent[1:]))

    def post(self, path: str = "/tasks/a/disable", **kwargs) -> Answer:
        return self.request("POST", path, **kwargs)


@pytest.fixture
def dash(tmp_path) -> Dashboard:
    sessions = Sessions(tmp_path / "revoked")
    guard = Guard(echo, token=TOKEN, hosts={"127.0.0.1", "localhost", "[::1]", "Dash.Example"},
                  sessions=sessions, cookie=COOKIE, login_page=login_page)
    return Dashboard(sessions, SecureHeaders(guard))


def bearer(token: str = TOKEN) -> dict:
    return {"Authorization": f"Bearer {token}"}


def body_of(*chunks: bytes) -> list[dict]:
    return [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)]


# ------------------------------------------------------------------------ the Host header


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "127.0.0.1", "localhost:8765", "LOCALHOST",
                                  "[::1]:8765", "[::1]", "dash.example:8765", "DASH.EXAMPLE",
                                  " localhost:8765 "])
def test_a_host_this_server_answers_to_is_let_through(dash, host):
    assert dash.request("GET", "/api/tasks", headers=bearer(), host=host).seen["caller"]


@pytest.mark.parametrize("host", ["evil.example:8765", "evil.example", "::1", "127.0.0.1:8765:1",
                                  "localhost.evil.example", "8765", "", None,
                                  "[::2]:8765", "127.0.0.2:8765"])
def test_a_foreign_or_missing_host_is_a_421_with_the_fix(dash, host):
    page = dash.request("GET", "/", headers=bearer(), host=host)
    assert page.status == 421
    assert page.text == ("unknown Host header: open the page by the address `scheduler.py web`"
                         " printed (or add --allow-host)\n")
    api = dash.request("GET", "/api/tasks", headers=bearer(), host=host)
    assert api.status == 421 and json.loads(api.body) == {
        "error": "unknown Host header: open the page by the address `scheduler.py web` printed"
                 " (or add --allow-host)"}
    assert api.header("content-type") == ["application/json"]


# ------------------------------------------------------------------------ token in the address


@pytest.mark.parametrize("path", ["/", "/api/tasks", "/login", "/static/app.js"])
def test_the_token_in_the_address_is_refused_even_with_good_credentials(dash, path):
    cookie, _ = dash.login()
    answer = dash.request("GET", path, headers={"Cookie": cookie, **bearer()},
                          query=b"a=1&token=" + TOKEN.encode())
    assert answer.status == 400
    text = answer.text if not path.startswith("/api/") else json.loads(answer.body)["error"]
    assert text.startswith("the access token never goes in the address (it would stay in the"
                           " browser's history): open the login link `scheduler.py web`"
                           " printed, or /login, or send Authorization: Bearer <token>")
    assert path.startswith("/api/") or text.endswith("<token>\n")
    assert dash.request("GET", path, headers=bearer(), query=b"tokens=1&x=token").status == 200


# ------------------------------------------------------------------------ who is calling


def test_static_files_need_no_session_but_a_static_post_does(dash):
    assert dash.request("GET", "/static/app.js").seen["caller"] is None
    assert dash.request("HEAD", "/static/app.js").status == 200
    refused = dash.post("/static/app.js", headers={"Origin": HERE})
    assert refused.status == 401 and refused.text.startswith("LOGIN PAGE: ")


def test_without_a_session_a_page_gets_the_login_page_and_the_api_a_401(dash):
    page = dash.request("GET", "/tasks/a")
    assert page.status == 401
    assert page.text == ("LOGIN PAGE: Log in with the link `scheduler.py web` printed, or with"
                         " the access token.")
    api = dash.request("GET", "/api/tasks")
    assert api.status == 401 and json.loads(api.body) == {
        "error": "send Authorization: Bearer <token> (the token file `scheduler.py web` named),"
                 " or log in at /login"}
    assert dash.post("/api/tasks/a/run", headers={"Origin": HERE}).status == 401


@pytest.mark.parametrize("value", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER {TOKEN}",
                                   f"Bearer   {TOKEN}  "])
def test_the_token_as_a_bearer_makes_an_api_caller(dash, value):
    seen = dash.request("GET", "/api/tasks", headers={"Authorization": value}).seen
    assert seen["caller"] == {"via": "api", "session": None, "csrf": None, "remote": "10.1.2.3"}


@pytest.mark.parametrize("value", [f"Basic {TOKEN}", f"Bearer{TOKEN}", f"Bearer {TOKEN}x",
                                   f"Bearer {TOKEN[:-1]}", "Bearer ", TOKEN, f"Token {TOKEN}",
                                   f"xBearer {TOKEN}"])
def test_anything_but_the_exact_token_is_no_caller(dash, value):
    assert dash.request("GET", "/api/tasks", headers={"Authorization": value}).status == 401


def test_a_session_cookie_makes_a_web_caller_with_its_label_and_csrf(dash):
    sid, session = dash.sessions.open("127.0.0.1", "test")
    for cookie in (f"{COOKIE}={sid}", f'theme=dark; {COOKIE}="{sid}"; other=1',
                   f"{COOKIE}=stale; {COOKIE}={sid}", f"junk; {COOKIE}={sid}",
                   f"  {COOKIE}={sid}  "):
        seen = dash.request("GET", "/", headers={"Cookie": cookie}).seen
        assert seen["caller"] == {"via": "web", "session": session.label,
                                  "csrf": session.csrf, "remote": "10.1.2.3"}, cookie
    for cookie in (f"mdcron_session_8766={sid}", f"x{COOKIE}={sid}", f"{COOKIE}x={sid}",
                   f"{COOKIE}={sid}x", f"{COOKIE}=XX{sid}", f"{COOKIE}=", sid):
        assert dash.request("GET", "/", headers={"Cookie": cookie}).status == 401, cookie


def test_the_caller_has_no_address_when_the_server_gives_none(dash):
    seen = dash.request("GET", "/api/tasks", headers=bearer(), client=None).seen
    assert seen["caller"]["remote"] == ""
    seen = dash.request("GET", "/api/tasks", headers=bearer(), client=("", 0)).seen
    assert seen["caller"]["remote"] == ""


# ------------------------------------------------------------------------ the login page


def test_the_login_page_is_open_and_its_form_must_come_from_here(dash):
    assert dash.request("GET", "/login").seen["caller"] is None
    cookie, _ = dash.login()
    assert dash.request("GET", "/login", headers={"Cookie": cookie}).seen["caller"]["via"] == "web"
    assert dash.post("/login", headers={"Origin": HERE}).seen["csrf_form"] is False
    for headers in ({}, {"Origin": "http://evil.example"}, {"Origin": "http://127.0.0.1:8766"}):
        refused = dash.post("/login", headers=headers)
        assert refused.status == 403 and refused.text == "cross-origin request refused\n"
        assert refused.header("connection") == ["close"]
    assert dash.post("/login/", headers={}).status == 401  # only /login itself is open


# ------------------------------------------------------------------------ Origin and CSRF


def test_a_session_read_needs_no_origin_and_a_token_post_needs_neither(dash):
    cookie, _ = dash.login()
    assert dash.request("GET", "/tasks/a", headers={"Cookie": cookie}).seen["caller"]
    assert dash.request("HEAD", "/tasks/a", headers={"Cookie": cookie}).status == 200
    seen = dash.post("/api/tasks/a/run", headers=bearer()).seen
    assert seen["caller"]["via"] == "api" and seen["csrf_form"] is False


def test_a_session_post_needs_this_origin(dash):
    cookie, csrf = dash.login()
    for headers in ({}, {"Origin": "http://evil.example:8765"}, {"Origin": "null"},
                    {"Origin": "http://127.0.0.1:8766"}, {"Origin": "https://127.0.0.1:8765"},
                    {"Origin": "http://127.0.0.1"},
                    {"Origin": "http://evil.example", "Referer": HERE + "/tasks/a"},
                    {"Referer": "http://evil.example/"}):
        page = dash.post(headers={"Cookie": cookie, "X-CSRF-Token": csrf, **headers})
        assert page.status == 403 and page.text == "cross-origin request refused\n", headers
        assert page.header("connection") == ["close"]
        api = dash.post("/api/tasks/a/run", headers={"Cookie": cookie, "X-CSRF-Token": csrf,
                                                     **headers})
        assert api.status == 403
        assert json.loads(api.body) == {"error": "cross-origin request refused"}
    for headers in ({"Origin": HERE}, {"Origin": "HTTP://127.0.0.1:8765"},
                    {"Referer": HERE + "/tasks/a?x=1"}):
        assert dash.post(headers={"Cookie": cookie, "X-CSRF-Token": csrf, **headers}).seen


def test_a_scope_without_scheme_or_query_takes_asgis_defaults(dash):
    cookie, csrf = dash.login()
    sent = {"Cookie": cookie, "X-CSRF-Token": csrf, "Origin": HERE}
    assert dash.post(headers=sent, scheme=None, query=None).seen["caller"]["via"] == "web"
    assert dash.post(headers={**sent, "Origin": "https://127.0.0.1:8765"},
                     scheme=None).status == 403


def test_the_default_port_counts_as_named(dash):
    cookie, csrf = dash.login()
    sent = {"Cookie": cookie, "X-CSRF-Token": csrf}
    assert dash.post(headers={**sent, "Origin": "http://127.0.0.1:80"}, host="127.0.0.1").seen
    assert dash.post(headers={**sent, "Origin": "http://127.0.0.1"}, host="127.0.0.1:80").seen
    assert dash.post(headers={**sent, "Origin": "https://127.0.0.1"}, host="127.0.0.1",
                     scheme="https").seen
    assert dash.post(headers={**sent, "Origin": "http://127.0.0.1"}, host="127.0.0.1",
                     scheme="https").status == 403


def test_the_csrf_header_must_be_the_sessions_and_without_it_the_form_is_checked(dash):
    cookie, csrf = dash.login()
    other_cookie, other_csrf = dash.login()
    for wrong in ("forged", "", other_csrf, csrf + "x", csrf.upper()):
        page = dash.post(headers={"Cookie": cookie, "Origin": HERE, "X-CSRF-Token": wrong})
        assert page.status == 403 and page.text == "bad CSRF token: reload the page\n", wrong
        assert page.header("connection") == ["close"]
        api = dash.post("/api/x", headers={"Cookie": cookie, "Origin": HERE,
                                           "X-CSRF-Token": wrong})
        assert json.loads(api.body) == {"error": "bad CSRF token: reload the page"}
    right = dash.post(headers={"Cookie": cookie, "Origin": HERE, "X-CSRF-Token": csrf}).seen
    assert right["csrf_form"] is False
    unsent = dash.post(headers={"Cookie": other_cookie, "Origin": HERE}).seen
    assert unsent["csrf_form"] is True and unsent["caller"]["csrf"] == other_csrf


def test_non_ascii_credentials_are_refused_not_crashed(dash):
    cookie, _ = dash.login()
    for raw in ([(b"authorization", b"Bearer \xff\xfe")],
                [(b"authorization", "Bearer tökén".encode())],
                [(b"cookie", COOKIE.encode() + b"=\xff\xfe")]):
        assert dash.request("GET", "/api/tasks", raw_headers=raw).status == 401
    answer = dash.post(headers={"Cookie": cookie, "Origin": HERE},
                       raw_headers=[(b"x-csrf-token", "é€".encode())])
    assert answer.status == 403 and answer.text == "bad CSRF token: reload the page\n"


# ------------------------------------------------------------------------ the body


def test_the_body_reaches_the_app_once_read_and_bounded(dash):
    cookie, csrf = dash.login()
    sent = {"Cookie": cookie, "Origin": HERE, "X-CSRF-Token": csrf}
    seen = dash.post(headers=sent, body=body_of(b"comment=", b"hello", b"")).seen
    assert seen["body"] == "comment=hello"
    exact = b"x" * MAX_BODY
    assert dash.post(headers={**sent, "Content-Length": str(MAX_BODY)},
                     body=body_of(exact)).seen["body"] == exact.decode()
    assert len(dash.post(headers=sent, body=body_of(exact[:100], exact[100:])).seen["body"]) \
        == MAX_BODY
    no_body_key = [{"type": "http.request", "more_body": False}]
    assert dash.post(headers=sent, body=no_body_key).seen["body"] == ""
    early = dash.post(headers=sent, body=[{"type": "http.request", "body": b"a=1",
                                           "more_body": True}, {"type": "http.disconnect"}])
    assert early.seen["body"] == "a=1"  # the client left: what came is what there is
    implicit_end = [{"type": "http.request", "body": b"a=2"}]  # more_body: False by default
    assert dash.post(headers=sent, body=implicit_end).seen["body"] == "a=2"
    after = dash.post("/after", headers=sent, body=[*body_of(b"a=", b"3"),
                                                    {"type": "http.disconnect"}]).seen
    assert (after["body"], after["after"]) == ("a=3", "http.disconnect")  # the body once


@pytest.mark.parametrize("api", [False, True])
def test_a_body_over_the_limit_is_a_413_and_the_connection_closes(dash, api):
    cookie, csrf = dash.login()
    path = "/api/tasks/a/comment" if api else "/tasks/a/comment"
    sent = {"Cookie": cookie, "Origin": HERE, "X-CSRF-Token": csrf}
    message = f"request body too large (at most {MAX_BODY} bytes)"
    answers = [
        dash.post(path, headers={**sent, "Content-Length": str(MAX_BODY + 1)}, body=[]),
        dash.post(path, headers={**sent, "Content-Length": "12abc"}, body=[]),
        dash.post(path, headers={**sent, "Content-Length": "-1"}, body=[]),
        dash.post(path, headers=sent, body=body_of(b"x" * MAX_BODY, b"y", b"z" * 10)[:2]),
    ]
    for answer in answers:
        assert answer.status == 413
        assert answer.header("connection") == ["close"]
        assert (json.loads(answer.body) == {"error": message} if api
                else answer.text == message + "\n")


async def stalled_post(app, path: str, cookie: str, csrf: str) -> tuple[int, dict, str]:
    """A POST whose body starts, then never finishes arriving: (status, headers, text)."""
    pieces = [{"type": "http.request", "body": b"a=", "more_body": True}]
    never = asyncio.Event()

    async def receive() -> dict:
        if pieces:
            return pieces.pop()
        await never.wait()
        raise AssertionError("unreachable")

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    headers = [(b"host", HOST.encode()), (b"cookie", cookie.encode()),
               (b"origin", HERE.encode()), (b"x-csrf-token", csrf.encode())]
    await app({"type": "http", "method": "POST", "scheme": "http", "path": path,
               "query_string": b"", "headers": headers, "client": ("10.1.2.3", 1)},
              receive, send)
    return (sent[0]["status"], dict(sent[0]["headers"]),
            b"".join(m.get("body", b"") for m in sent[1:]).decode())


def test_a_body_slower_than_body_seconds_is_a_408(dash, monkeypatch):
    """The limit's own value (15 s) is not waited for: the test shortens it to 1 s."""
    monkeypatch.setattr(security, "BODY_SECONDS", 1.0)
    cookie, csrf = dash.login()
    status, headers, text = asyncio.run(stalled_post(dash.app, "/x", cookie, csrf))
    assert (status, headers[b"connection"]) == (408, b"close")
    assert text == "the request body took over 1 s to arrive\n"
    status, headers, text = asyncio.run(stalled_post(dash.app, "/api/x", cookie, csrf))
    assert (status, headers[b"connection"]) == (408, b"close")
    assert json.loads(text) == {"error": "the request body took over 1 s to arrive"}


# ------------------------------------------------------------------------ headers on every answer


def test_every_answer_carries_the_strict_headers_once(dash):
    cookie, _ = dash.login()
    answers = [dash.request("GET", "/", headers={"Cookie": cookie}),
               dash.request("GET", "/", host="evil.example"),
               dash.request("GET", "/api/tasks"),
               dash.post(headers={"Cookie": cookie})]
    for answer in answers:
        for name, value in security.HEADERS:
            assert answer.header(name.decode()) == [value.decode()], (answer.status, name)
    own = dash.request("GET", "/own-cache", headers={"Cookie": cookie})
    assert own.header("cache-control") == ["max-age=5"]  # the app's own, not doubled
    assert own.header("x-frame-options") == ["DENY"]


def test_headers_are_added_to_an_answer_that_has_none(tmp_path):
    async def bare(scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 204})
        await send({"type": "http.response.body", "body": b""})

    answer = Dashboard(Sessions(tmp_path / "r"), SecureHeaders(bare)).request()
    assert answer.status == 204
    assert [k for k, _ in answer.headers] == [k.decode() for k, _ in security.HEADERS]


def test_a_lifespan_scope_passes_both_layers_untouched(dash):
    scope = {"type": "lifespan"}
    sent: list[dict] = []

    async def startup() -> dict:
        return {"type": "lifespan.startup"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(dash.app(scope, startup, send))
    assert sent == [{"type": "lifespan.startup.complete"}]
    assert scope == {"type": "lifespan"}  # no caller, no state: the guard judged nothing


def test_a_request_the_guard_cannot_read_is_refused_not_let_through(dash):
    """A header no rule foresaw (here a name that is not bytes, from an odd server)."""
    odd = [("x-odd", b"1")]
    page = dash.request("GET", "/", headers=bearer(), raw_headers=odd)
    assert (page.status, page.text) == (400, "bad request headers\n")
    api = dash.request("GET", "/api/tasks", headers=bearer(), raw_headers=odd)
    assert (api.status, json.loads(api.body)) == (400, {"error": "bad request headers"})
    post = dash.post("/api/tasks/a/run", headers=bearer(), raw_headers=odd)
    assert post.status == 400 and post.header("connection") == ["close"]


# ------------------------------------------------------------------------ the public helpers


def test_cookie_name_is_per_port():
    assert cookie_name(8765) == "mdcron_session_8765"
    assert cookie_name(1) != cookie_name(2)


@pytest.mark.parametrize(("host", "loopback"), [
    ("localhost", True), ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True),
    ("[::1]", True), ("0.0.0.0", False), ("10.0.0.1", False), ("::", False),
    ("example.com", False), ("", False), ("LOCALHOST.evil", False), ("X127.0.0.1", False),
    ("localhost.", False)])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_same_compares_any_text():
    assert same("abc", "abc") is True
    assert same("abc", "abd") is False
    assert same("", "") is True
    assert same("é€", "é€") is True and same("é", "e") is False
    assert same("\udcff", "\udcff") is True  # a lone surrogate (a header decoded oddly)
    assert same("\udcff", "\udcfe") is False


@pytest.mark.parametrize(("url", "expected"), [
    ("http://127.0.0.1:8765", ("http", "127.0.0.1", 8765)),
    ("http://Example.COM", ("http", "example.com", 80)),
    ("https://example.com", ("https", "example.com", 443)),
    ("  HTTPS://x.example:8443/path?q=1  ", ("https", "x.example", 8443)),
    ("http://[::1]:8765/", ("http", "::1", 8765)),
    ("ftp://example.com", None), ("null", None), ("", None), ("http://", None),
    ("http://x:99999", None), ("http://x:port", None), ("//example.com", None)])
def test_origin_of(url, expected):
    assert origin_of(url) == expected


def test_allowed_hosts():
    assert allowed_hosts("127.0.0.1", []) == {"127.0.0.1", "localhost", "[::1]"}
    assert allowed_hosts("0.0.0.0", ["Dash.Example"]) == {"127.0.0.1", "localhost", "[::1]",
                                                          "dash.example"}
    assert allowed_hosts("::", []) == {"127.0.0.1", "localhost", "[::1]"}
    assert allowed_hosts("", []) == {"127.0.0.1", "localhost", "[::1]"}
    assert allowed_hosts("192.168.1.5", []) == {"127.0.0.1", "localhost", "[::1]",
                                                "192.168.1.5"}
    assert allowed_hosts("fd00::5", ["a", "B"]) == {"127.0.0.1", "localhost", "[::1]",
                                                    "[fd00::5]", "a", "b"}


def test_caller_of_a_request_the_guard_never_saw():
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}
    assert caller_of(Request(scope)) is None
    assert caller_of(Request({**scope, "state": {}})) is None
