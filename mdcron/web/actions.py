"""POST actions: each calls the core function its CLI command calls (mdcron/cli/actions.py,
comments, incidents, heal, pause), then sends the browser back to a page (303).

Lazy imports: each POST action loads the core module behind it (comments, self-heal, incidents,
pauses) when it is used, so serving pages does not load them.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ..cli import actions as core
from ..state.store import state_store
from ..tasks.task import DISABLED_REASONS
from . import data
from .app import MAX_COMMENT
from .pages import int_param, task_id, task_page
from .times import until_instant


def _config(web):
    config, notes = data.config_or_problems(web.home)
    if config is None:
        raise HTTPException(409, "the config has problems: " + "; ".join(notes))
    return config


def _back(request: Request, target: str) -> Response:
    return RedirectResponse(target, status_code=303)  # 303: the browser GETs the page


def run_now(web, config, tid: str) -> int:
    """Start `scheduler.py run <id>` detached; a thread reaps it. Returns its pid."""
    proc = core.start_run(config, tid)
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc.pid


def routes(web) -> list[Route]:
    async def run(request: Request) -> Response:
        await web.form(request)
        tid = task_id(request)
        try:
            run_now(web, _config(web), tid)
        except core.ActionError as exc:
            raise HTTPException(404, str(exc)) from exc
        return _back(request, f"/tasks/{tid}?started={web.clock():.0f}")  # a row at once

    async def enable(request: Request) -> Response:
        await web.form(request)
        tid = task_id(request)
        try:
            core.set_enabled(_config(web), tid, True, None, web.clock())
        except core.ActionError as exc:
            raise HTTPException(404, str(exc)) from exc
        return _back(request, f"/tasks/{tid}")

    async def disable(request: Request) -> Response:
        form = await web.form(request)
        tid = task_id(request)
        reason = form.get("reason") or "by_choice"
        if reason not in DISABLED_REASONS:
            raise HTTPException(400, f"reason must be one of {', '.join(DISABLED_REASONS)}")
        until = None
        if form.get("until"):
            try:  # read in the zone the person chose (issue 24), else the server's
                until = until_instant(form["until"], form.get("zone") or None)
                if until <= web.clock():
                    raise ValueError(f"the pause would end at {form['until'][:40]}, which is"
                                     " already past: choose a later time")
            except ValueError as exc:  # the page again with what was typed (issue 24)
                typed = {"until": form["until"][:40], "zone": (form.get("zone") or "")[:60]}
                return task_page(web, request, _config(web), 400,
                                 {**typed, "error": f"Not paused: {exc}"})
            reason = "paused"
        try:
            core.set_enabled(_config(web), tid, False, reason, web.clock(), until)
        except core.ActionError as exc:
            raise HTTPException(400 if until else 404, str(exc)) from exc
        return _back(request, f"/tasks/{tid}")

    async def comment(request: Request) -> Response:
        from ..claude.comments import add_comment

        form = await web.form(request)
        tid = task_id(request)
        text = (form.get("text") or "").strip()
        if not text:
            raise HTTPException(400, "the comment is empty")
        if len(text) > MAX_COMMENT:
            raise HTTPException(413, f"a comment is at most {MAX_COMMENT} characters")
        config = _config(web)
        try:
            task = core.load_task(config, tid)
        except core.ActionError as exc:
            raise HTTPException(404, str(exc)) from exc
        author = (form.get("author") or "web").strip()[:60] or "web"
        with state_store(config) as store:
            add_comment(store, task.id, author, text, web.clock())
        return _back(request, f"/tasks/{tid}#comments")

    async def revert(request: Request) -> Response:
        from ..selfheal.healer import RevertError, revert_heal

        form = await web.form(request)
        tid = task_id(request)
        config = _config(web)
        try:
            task = core.load_task(config, tid)
            with state_store(config) as store:
                revert_heal(config, store, task.id, now=web.clock(), force=bool(form.get("force")))
        except core.ActionError as exc:
            raise HTTPException(404, str(exc)) from exc
        except RevertError as exc:
            raise HTTPException(409, str(exc)) from exc
        return _back(request, f"/tasks/{tid}")

    async def resolve(request: Request) -> Response:
        from ..alerts.incidents import resolve as resolve_incident

        await web.form(request)
        number = int_param(request.path_params["incident"], "incident")
        config = _config(web)
        with state_store(config) as store:
            done = resolve_incident(store, number or 0, web.clock(), "resolved in the web page")
        if not done:
            raise HTTPException(404, f"no open incident #{number}")
        return _back(request, "/incidents")

    async def pause(request: Request) -> Response:
        from ..schedule.pause import start_maintenance

        await web.form(request)
        start_maintenance(str(web.home), datetime.fromtimestamp(web.clock(), UTC).isoformat(),
                          "web")
        return _back(request, "/health")

    async def resume(request: Request) -> Response:
        from ..schedule.pause import end_maintenance

        await web.form(request)
        end_maintenance(str(web.home))
        return _back(request, "/health")

    post = ["POST"]
    return [
        Route("/tasks/{task_id}/run", run, methods=post),
        Route("/tasks/{task_id}/enable", enable, methods=post),
        Route("/tasks/{task_id}/disable", disable, methods=post),
        Route("/tasks/{task_id}/comment", comment, methods=post),
        Route("/tasks/{task_id}/revert-heal", revert, methods=post),
        Route("/incidents/{incident}/resolve", resolve, methods=post),
        Route("/maintenance/on", pause, methods=post),
        Route("/maintenance/off", resume, methods=post),
    ]
