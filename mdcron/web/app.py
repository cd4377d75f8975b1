"""The app factory: routes (pages.py, actions.py, api.py, login.py), templates, errors, the
guard, the static files (read once, served from memory: no thread, no disk, whatever the
database is doing).

Every route that touches the database or the disk runs in a worker thread (a sync endpoint, or
`web.work`), so the event loop keeps answering; the store waits at most WEB_LOCK_WAIT for a
writer's lock, and a database still busy then gives a 503 page saying so (issue 24).

Lazy imports: markdown-it only when a comment is rendered; web/actions.py imports this module
back (a circle at the top), so the factory imports the route modules when it builds the app.
"""

from __future__ import annotations

import asyncio
import hashlib
import mimetypes
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..state.store import StoreError
from ..state.trouble import is_busy
from .security import MAX_BODY, Guard, SecureHeaders, caller_of, same
from .sessions import REVOKED, Sessions
from .times import when

HERE = Path(__file__).resolve().parent
MAX_FORM = MAX_BODY  # bytes of a POST body; a comment is at most MAX_COMMENT characters
IN_FLIGHT = 64  # requests in the routes at once (Gate); the worker threads are fewer anyway
QUEUE_SECONDS = 10.0  # how long a request waits for its turn before a 503
WEB_LOCK_WAIT = 2.0  # seconds a request waits for a tick's write lock before "busy" (503)
BUSY = ("the database is busy: a tick (or another program) holds its write lock. Nothing was"
        " changed; this page tries again by itself, or reload it in a moment")


def _markdown() -> Callable[[str], str]:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False})  # raw HTML is escaped
    return md.render


def make_templates() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      auto_reload=False)
    env.filters["when"] = when  # <time>: static/times.js shows it in the browser's zone
    env.filters["markdown"] = _markdown()
    # macros as globals: a page's live block is rendered alone (Web.page) without its imports
    macros = env.get_template("macros.html").module
    env.globals.update(st=macros.status, button=macros.button,  # type: ignore[attr-defined]
                       runs_table=macros.runs_table,  # type: ignore[attr-defined]
                       sort_th=macros.sort_th,  # type: ignore[attr-defined]
                       task_row=macros.task_row)  # type: ignore[attr-defined]
    return env


class Web:
    """What every route needs: the home, the clock, the templates, the sessions."""

    def __init__(self, home: Path, clock: Callable[[], float], sessions: Sessions,
                 user: str = "web"):
        self.home = home
        self.clock = clock
        self.templates = make_templates()
        self.sessions = sessions
        self.user = user  # the account the server runs as: the one the login link went to

    def page(self, request: Request, name: str, code: int = 200, **context: object) -> Response:
        """A full page, or only its live part when the poller asks (X-Live: 1)."""
        live = request.headers.get("x-live") == "1"
        template = self.templates.get_template(name)
        caller = caller_of(request)
        context.update(csrf=caller.csrf if caller else "", now=self.clock(),
                       path=request.url.path, query=str(request.url.query), live=live,
                       session=caller.session if caller else None)
        if not live or "live" not in template.blocks:  # an error page: whole, with its code
            return HTMLResponse(template.render(context), status_code=code)
        html = "".join(template.blocks["live"](template.new_context(context)))
        # issue 24: an unchanged live part is a 304 of a few bytes (the poller sends the tag)
        tag = '"' + hashlib.blake2b(html.encode(), digest_size=12).hexdigest() + '"'
        if code == 200 and request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"etag": tag})
        return HTMLResponse(html, status_code=code, headers={"etag": tag})

    async def form(self, request: Request) -> dict[str, str]:
        """The POSTed form (urlencoded; security.Guard has read and bounded the body),
        CSRF-checked when the guard asks."""
        body = await request.body()
        if len(body) > MAX_FORM:
            raise HTTPException(413, "request body too large")
        try:
            fields = {k: v[0] for k, v in parse_qs(body.decode("utf-8"),
                                                     keep_blank_values=True).items()}
        except UnicodeDecodeError as exc:
            raise HTTPException(400, "the form is not UTF-8") from exc
        caller = caller_of(request)
        if request.scope.get("state", {}).get("csrf_form") and not (
                caller and same(fields.get("csrf", ""), caller.csrf or "")):
            raise HTTPException(403, "bad CSRF token: reload the page")
        return fields

    async def work(self, fn: Callable, *args: object, **kwargs: object):
        """`fn(*args)` in a worker thread: the event loop keeps serving meanwhile."""
        return await run_in_threadpool(fn, *args, **kwargs)

    def who(self, request: Request) -> tuple[str, str]:
        """(who, from where) for the audit: 'web session 1a2b3c4d (alice)', the address."""
        caller = caller_of(request)
        if caller is None:
            return f"web ({self.user})", ""
        if caller.via == "api":
            return f"api token ({self.user})", caller.remote
        return f"web session {caller.session} ({self.user})", caller.remote


def static_files() -> dict[str, tuple[bytes, str]]:
    """Every file in static/, read once: (bytes, content type) by name."""
    out = {}
    for path in sorted((HERE / "static").iterdir()):
        if path.is_file():
            kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            if kind.startswith("text/") or kind.endswith("javascript"):
                kind += "; charset=utf-8"
            out[path.name] = (path.read_bytes(), kind)
    return out


class Gate:
    """At most IN_FLIGHT requests in the routes at once (after the guard: a request without a
    session costs no turn); the others wait up to QUEUE_SECONDS for a turn, then get 503. The
    static files pass. A burst is served in turn instead of all at once on two cores."""

    def __init__(self, app: ASGIApp):
        self.app = app
        self.turns = asyncio.Semaphore(IN_FLIGHT)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        try:
            async with asyncio.timeout(QUEUE_SECONDS):
                await self.turns.acquire()
        except TimeoutError:
            refusal = PlainTextResponse("too many requests at once: try again in a moment\n",
                                        status_code=503, headers={"retry-after": "2"})
            await refusal(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.turns.release()


def busy(exc: BaseException) -> bool:
    """A database a writer held past WEB_LOCK_WAIT (SQLite's 'locked', or the store's one
    line about it)."""
    return is_busy(exc) or (isinstance(exc, StoreError) and "locked" in str(exc))


def create_app(home: Path, token: str, hosts: set[str],
               clock: Callable[[], float] = time.time, port: int = 8765,
               user: str = "web", sessions: Sessions | None = None) -> Callable:
    from . import actions, api, login, metrics, pages, runlog

    sessions = sessions or Sessions(home / "state" / REVOKED)
    web = Web(home, clock, sessions, user)
    files = static_files()

    async def static(request: Request) -> Response:
        found = files.get(request.path_params["name"])
        if found is None:
            raise HTTPException(404, "no such file")
        return Response(found[0], media_type=found[1])

    routes = [*pages.routes(web), *actions.routes(web), *api.routes(web), *runlog.routes(web),
              *metrics.routes(web),  # issue 26: /metrics, behind the token like the rest
              *login.routes(web, token, port), Route("/static/{name}", static)]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", None) or "error"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": detail}, status_code=status)
        return web.page(request, "error.html", code=status, status_code=status, message=detail)

    async def database_error(request: Request, exc: Exception) -> Response:
        if not busy(exc):
            raise exc  # to crash(), below
        if request.url.path.startswith("/api/"):
            answer: Response = JSONResponse({"error": BUSY}, status_code=503)
        else:
            answer = web.page(request, "error.html", code=503, status_code=503, message=BUSY)
        answer.headers["retry-after"] = "2"
        return answer

    async def crash(request: Request, exc: Exception) -> Response:
        # never a traceback on the page: the message names the kind; the console has the rest
        import traceback

        traceback.print_exception(exc)
        message = f"internal error ({type(exc).__name__}); see the `scheduler.py web` console"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=500)
        return HTMLResponse(f"<h1>500</h1><p>{message}</p>", status_code=500)

    guard = Middleware(Guard, token=token, hosts=hosts, sessions=sessions,
                       cookie=login.cookie_name(port), login_page=login.page_maker(web))
    app = Starlette(routes=routes, middleware=[guard, Middleware(Gate)],
                    exception_handlers={HTTPException: http_error, Exception: crash,
                                        sqlite3.OperationalError: database_error,
                                        StoreError: database_error})
    return SecureHeaders(app)
