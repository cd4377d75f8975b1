"""The app factory: routes (pages.py, actions.py, api.py), templates, errors, the guard.

Lazy imports: markdown-it only when a comment is rendered; web/actions.py imports this module
back (a circle at the top), so the factory imports the route modules when it builds the app.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from .security import Guard, csrf_for
from .times import when

HERE = Path(__file__).resolve().parent
MAX_FORM = 64 * 1024  # bytes of a POST body; a comment is at most MAX_COMMENT characters
MAX_COMMENT = 10_000


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
    """What every route needs: the home, the clock, the templates."""

    def __init__(self, home: Path, clock: Callable[[], float], token: str):
        self.home = home
        self.clock = clock
        self.templates = make_templates()
        self.csrf = csrf_for(token)

    def page(self, request: Request, name: str, code: int = 200, **context: object) -> Response:
        """A full page, or only its live part when the poller asks (X-Live: 1)."""
        live = request.headers.get("x-live") == "1"
        template = self.templates.get_template(name)
        context.update(csrf=self.csrf, now=self.clock(), path=request.url.path,
                       query=str(request.url.query), live=live)
        if not live or "live" not in template.blocks:  # an error page: whole, with its code
            return HTMLResponse(template.render(context), status_code=code)
        html = "".join(template.blocks["live"](template.new_context(context)))
        # issue 24: an unchanged live part is a 304 of a few bytes (the poller sends the tag)
        tag = '"' + hashlib.blake2b(html.encode(), digest_size=12).hexdigest() + '"'
        if code == 200 and request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"etag": tag})
        return HTMLResponse(html, status_code=code, headers={"etag": tag})

    async def form(self, request: Request) -> dict[str, str]:
        """The POSTed form (urlencoded), size-capped, CSRF-checked when the guard asks."""
        if int(request.headers.get("content-length") or 0) > MAX_FORM:
            raise HTTPException(413, "request body too large")
        body = await request.body()
        if len(body) > MAX_FORM:
            raise HTTPException(413, "request body too large")
        try:
            fields = {k: v[0] for k, v in parse_qs(body.decode("utf-8"),
                                                     keep_blank_values=True).items()}
        except UnicodeDecodeError as exc:
            raise HTTPException(400, "the form is not UTF-8") from exc
        if request.scope.get("state", {}).get("csrf_form") and not hmac.compare_digest(
                fields.get("csrf", ""), self.csrf):
            raise HTTPException(403, "bad CSRF token: reload the page")
        return fields


def create_app(home: Path, token: str, hosts: set[str],
               clock: Callable[[], float] = time.time) -> Starlette:
    from . import actions, api, pages, runlog

    web = Web(home, clock, token)
    routes = [*pages.routes(web), *actions.routes(web), *api.routes(web), *runlog.routes(web),
              Mount("/static", StaticFiles(directory=HERE / "static"), name="static")]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", None) or "error"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": detail}, status_code=status)
        return web.page(request, "error.html", code=status, status_code=status, message=detail)

    async def crash(request: Request, exc: Exception) -> Response:
        # never a traceback on the page: the message names the kind; the console has the rest
        import traceback

        traceback.print_exception(exc)
        message = f"internal error ({type(exc).__name__}); see the `scheduler.py web` console"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=500)
        return HTMLResponse(f"<h1>500</h1><p>{message}</p>", status_code=500)

    return Starlette(routes=routes, middleware=[Middleware(Guard, token=token, hosts=hosts)],
                     exception_handlers={HTTPException: http_error, Exception: crash})
