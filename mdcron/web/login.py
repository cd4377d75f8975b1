"""Logging in to the dashboard (issue 24): the one-time code of the printed link, the token
form (for a browser the link did not reach), logging out, and ending a session from Health.

After a login the browser always goes to "/": no address taken from the request, so no open
redirect. The session cookie is named after the port, HttpOnly, SameSite=Strict, Path=/, and
Secure behind https.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ..cli.audit import record_action
from . import data
from .security import caller_of, cookie_name, same
from .sessions import CODE_TTL, MAX_AGE, Session

SPENT = (f"This login link was used already or has expired (a link works once, for"
         f" {CODE_TTL / 60:.0f} minutes). Restart `scheduler.py web` for a new one, or paste the"
         " access token below.")


def page_maker(web) -> Callable[[str, int], Response]:
    """The login page, with a message and a status (401 for a request without a session)."""
    def page(message: str, status: int = 200) -> Response:
        html = web.templates.get_template("login.html").render(title="Log in", message=message)
        return HTMLResponse(html, status_code=status)

    return page


def note(web, who: str, action: str, detail: str, remote: str) -> None:
    """Logins, logouts and revoked sessions go in the audit too (a broken config: not)."""
    config, _ = data.config_or_problems(web.home)
    if config is not None:
        record_action(config, who, action, detail=detail, origin=remote, now=web.clock())


def routes(web, token: str, port: int) -> list[Route]:
    name = cookie_name(port)
    page = page_maker(web)

    async def enter(request: Request, sid: str, session: Session, how: str) -> Response:
        await web.work(note, web, f"web session {session.label} ({web.user})", "login", how,
                       session.remote)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(name, sid, max_age=int(MAX_AGE), path="/", httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")
        return response

    def client(request: Request) -> tuple[str, str]:
        return (request.client.host if request.client else "",
                request.headers.get("user-agent", ""))

    async def login(request: Request) -> Response:
        if request.method == "POST":
            fields = await web.form(request)
            if not same(fields.get("token", "").strip(), token):
                return page("That is not the access token: it is in the token file"
                            " `scheduler.py web` named (state/web-token by default).", 401)
            sid, session = web.sessions.open(*client(request))
            return await enter(request, sid, session, "with the token")
        code = request.query_params.get("code")
        if code is None:
            return page("Paste the access token, or open the login link `scheduler.py web`"
                        " printed.")
        opened = web.sessions.redeem(code, *client(request))
        if opened is None:
            return page(SPENT, 401)
        return await enter(request, *opened, "with the one-time link")

    async def logout(request: Request) -> Response:
        await web.form(request)
        caller = caller_of(request)
        if caller is not None and caller.session:
            web.sessions.revoke(caller.session)
            await web.work(note, web, *web.who(request)[:1], "logout", "", caller.remote)
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(name, path="/")
        return response

    async def revoke(request: Request) -> Response:
        await web.form(request)
        label = request.path_params["label"]
        if not web.sessions.revoke(label):
            raise HTTPException(404, "no such session (it ended already)")
        who, where = web.who(request)
        await web.work(note, web, who, "revoke-session", f"session {label}", where)
        return RedirectResponse("/health#sessions", status_code=303)

    return [Route("/login", login, methods=["GET", "POST"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/sessions/{label}/revoke", revoke, methods=["POST"])]
