"""POST actions: each calls the core function its CLI command calls (mdcron/cli/actions.py,
comments, incidents, heal, pause), records who did it (cli/audit.py), then sends the browser
back to a page (303). The work runs in a worker thread (web.work): the event loop keeps
serving other requests meanwhile.

"Run now" starts at most one run of a task at a time from here: while one is starting or
running, another answers 409 (issue 24: a replayed request started 36 runs).

Lazy imports: each POST action loads the core module behind it (comments, self-heal, incidents,
pauses) when it is used, so serving pages does not load them.
"""

from __future__ import annotations

import subprocess
import threading
from datetime import UTC, datetime

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ..cli import actions as core
from ..cli.audit import record_action
from ..state.store import state_store
from ..tasks.task import DISABLED_REASONS
from . import data
from .pages import config_or_409 as _config
from .pages import int_param, task_id, task_page
from .security import MAX_COMMENT
from .times import until_instant


def _back(request: Request, target: str) -> Response:
    return RedirectResponse(target, status_code=303)  # 303: the browser GETs the page


def record(web, request: Request, config, action: str, tid: str | None = None,
           detail: str | None = None) -> None:
    """Who did it (the session or the token, and the account), from where: cli/audit.py."""
    who, where = web.who(request)
    record_action(config, who, action, tid, detail=detail, origin=where, now=web.clock())


class Starter:
    """`scheduler.py run <id>` for the page and the API, one at a time per task."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[str, subprocess.Popen] = {}

    def start(self, config, tid: str) -> int:
        """The pid; HTTPException 409 while a run of the task is starting or running."""
        with self._lock:
            proc = self._started.get(tid)
            if proc is not None and proc.poll() is None:
                raise HTTPException(409, f"{tid} is already starting or running (pid"
                                    f" {proc.pid}): wait for it to end")
            running = _running_run(config, tid)
            if running is not None:
                raise HTTPException(409, f"{tid} is running (run {running}): wait for it to"
                                    " end")
            proc = core.start_run(config, tid)
            self._started[tid] = proc
        threading.Thread(target=proc.wait, daemon=True).start()  # reaped, never a zombie
        return proc.pid


def _running_run(config, tid: str) -> int | None:
    if not config.state_exists:
        return None
    with state_store(config) as store:
        return next((int(r["id"]) for r in store.running_rows() if r["task_id"] == tid), None)


STARTER = Starter()


def run_now(web, config, tid: str, request: Request | None = None) -> int:
    """Start a run (409 while one is on), and record who asked. Returns its pid."""
    try:
        pid = STARTER.start(config, tid)
    except core.ActionError as exc:
        raise HTTPException(404, str(exc)) from exc
    if request is not None:
        record(web, request, config, "run", tid, f"pid {pid}")
    return pid


def routes(web) -> list[Route]:
    async def run(request: Request) -> Response:
        await web.form(request)
        tid = task_id(request)

        def work() -> None:
            try:
                run_now(web, _config(web), tid, request)
            except core.ActionError as exc:
                raise HTTPException(404, str(exc)) from exc

        await web.work(work)
        return _back(request, f"/tasks/{tid}?started={web.clock():.0f}")  # a row at once

    async def enable(request: Request) -> Response:
        await web.form(request)
        tid = task_id(request)

        def work() -> None:
            config = _config(web)
            try:
                core.set_enabled(config, tid, True, None, web.clock())
            except core.ActionError as exc:
                raise HTTPException(404, str(exc)) from exc
            record(web, request, config, "enable", tid)

        await web.work(work)
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
                typed = {"until": form["until"][:40], "zone": (form.get("zone") or "")[:60],
                         "error": f"Not paused: {exc}"}
                return await web.work(lambda: task_page(web, request, _config(web), 400, typed))
        if until is not None:
            reason = "paused"

        def work() -> None:
            config = _config(web)
            try:
                core.set_enabled(config, tid, False, reason, web.clock(), until)
            except core.ActionError as exc:
                raise HTTPException(400 if until else 404, str(exc)) from exc
            detail = reason + (f" until {form['until']}" if until is not None else "")
            record(web, request, config, "pause" if until is not None else "disable", tid,
                   detail)

        await web.work(work)
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

        def work() -> None:
            config = _config(web)
            try:
                task = core.load_task(config, tid)
            except core.ActionError as exc:
                raise HTTPException(404, str(exc)) from exc
            with state_store(config) as store:  # the author is the session's account
                number = add_comment(store, task.id, web.user, text, web.clock())
            record(web, request, config, "comment", task.id, f"#{number}")

        await web.work(work)
        return _back(request, f"/tasks/{tid}#comments")

    async def revert(request: Request) -> Response:
        from ..selfheal.healer import RevertError, revert_heal

        form = await web.form(request)
        tid = task_id(request)
        confirmed = form.get("confirm") or None  # a hidden `force` is not read at all

        def work() -> Response:
            config = _config(web)
            try:
                task = core.load_task(config, tid)
                with state_store(config) as store:
                    restored = revert_heal(config, store, task.id, now=web.clock(),
                                           confirmed=confirmed)
            except core.ActionError as exc:
                raise HTTPException(404, str(exc)) from exc
            except RevertError as exc:
                if exc.changed is None:
                    raise HTTPException(409, str(exc)) from exc
                return web.page(request, "confirm_revert.html", code=409, title=tid,
                                task_id=tid, message=str(exc).partition(";")[0],
                                changed=exc.changed)
            record(web, request, config, "revert-heal", task.id,
                   ("confirmed over later edits: " if confirmed else "")
                   + ", ".join(p.name for p in restored))
            return _back(request, f"/tasks/{tid}")

        return await web.work(work)

    async def resolve(request: Request) -> Response:
        from ..alerts.incidents import resolve as resolve_incident

        await web.form(request)
        number = int_param(request.path_params["incident"], "incident")

        def work() -> None:
            config = _config(web)
            with state_store(config) as store:
                done = resolve_incident(store, number or 0, web.clock(),
                                        "resolved in the web page")
            if not done:
                raise HTTPException(404, f"no open incident #{number}")
            record(web, request, config, "resolve", None, f"incident #{number}")

        await web.work(work)
        return _back(request, "/incidents")

    async def pause(request: Request) -> Response:
        from ..schedule.pause import start_maintenance

        await web.form(request)
        who, _ = web.who(request)

        def work() -> None:
            start_maintenance(str(web.home), datetime.fromtimestamp(web.clock(), UTC)
                              .isoformat(), who)
            config, _ = data.config_or_problems(web.home)
            if config is not None:
                record(web, request, config, "maintenance-on")

        await web.work(work)
        return _back(request, "/health")

    async def resume(request: Request) -> Response:
        from ..schedule.pause import end_maintenance

        await web.form(request)

        def work() -> None:
            ended = end_maintenance(str(web.home))
            config, _ = data.config_or_problems(web.home)
            if ended and config is not None:
                record(web, request, config, "maintenance-off")

        await web.work(work)
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
