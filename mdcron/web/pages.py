"""The HTML pages (GET only: they change nothing). Each has a `live` block the poller
(static/live.js) fetches again every few seconds. The handlers are plain functions: Starlette
runs them in a worker thread, so a page waiting on the database or the disk never holds up
the event loop (issue 24)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime

from markupsafe import Markup
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import data
from .chart import duration_chart
from .find import SORTS
from .upcoming import upcoming_view

ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # taskfile's id rule, bounded
STATUSES = ("success", "failed", "timeout", "crashed", "lost", "skipped", "running",  # runs'
            "never", "disabled", "invalid")
RUN_STATUSES = STATUSES[:7]


def task_id(request: Request) -> str:
    value = request.path_params["task_id"]
    if not ID.fullmatch(value) or ".." in value:
        raise HTTPException(404, "not a task id")
    return value


def int_param(value: str | None, name: str) -> int | None:
    if value in (None, ""):
        return None
    if not value.isdigit() or len(value) > 18:
        raise HTTPException(400, f"{name} must be a number")
    return int(value)


def config_or_409(web):
    """The config for an action or an API read; 409 naming its problems when it has some."""
    config, notes = data.config_or_problems(web.home)
    if config is None:
        raise HTTPException(409, "the config has problems: " + "; ".join(notes))
    return config


def config_or_page(web, request: Request):
    """(config, warnings), or a page that shows why the config cannot be used."""
    config, notes = data.config_or_problems(web.home)
    if config is None:
        return None, web.page(request, "broken.html", problems=notes, title="Config problem")
    return config, notes


# Rendered Tasks rows by what they show: a row whose fields did not change since the last
# poll is not rendered again (1,000 rows cost ~180 ms; the markup does not depend on the clock)
_ROWS: dict[bytes, Markup] = {}


def row_html(web, row: dict, paused: bool, rows: int) -> Markup:
    key = hashlib.blake2b(json.dumps([row, paused], sort_keys=True, default=str).encode(),
                          digest_size=16).digest()
    html = _ROWS.get(key)
    if html is None:
        if len(_ROWS) > 3 * rows + 100:  # rows that changed since: dropped now and then
            _ROWS.clear()
        html = _ROWS[key] = Markup(web.templates.globals["task_row"](row, paused))
    return html


STARTING = 60.0  # seconds a "starting…" row shows after "run now" until its run appears


def _starting(asked: str, now: float, runs: list[dict]) -> float | None:
    """When "run now" was pressed (?started=<epoch>, recent) and no run started since: the
    page shows a "starting…" row at once, until the run's own row is there."""
    if not asked.isdigit() or now - float(asked) >= STARTING:
        return None
    for r in runs[:5]:
        if r.get("started_at") and datetime.fromisoformat(r["started_at"]).timestamp() >= \
                float(asked) - 1:
            return None
    return float(asked)


def task_page(web, request: Request, config, code: int = 200,
              pause_form: dict | None = None) -> Response:
    """The Task page; `pause_form`: the pause's typed input and why it was refused (issue 24:
    the page again, with what was typed, not an error page)."""
    now = web.clock()
    try:
        view = data.task_view(config, task_id(request), now)
    except data.NotFound as exc:
        raise HTTPException(404, str(exc)) from exc
    starting = _starting(request.query_params.get("started") or "", now, view["runs"])
    return web.page(request, "task.html", code=code, title=view["task"]["id"],
                    shared=bool(config.state_url), chart=duration_chart(view["runs"]),
                    starting=starting, pause_form=pause_form, **view)


def routes(web) -> list[Route]:
    def tasks(request: Request) -> Response:
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        qp = request.query_params
        tag = qp.get("tag") or None
        status = qp.get("status") if qp.get("status") in STATUSES else None
        q = (qp.get("q") or "")[:200]
        sort = qp.get("sort") if qp.get("sort") in SORTS else None
        desc = qp.get("dir") == "desc"
        view = data.tasks_view(config, web.clock(), tag, status, q, sort, desc)
        paused = view["maintenance"] is not None
        return web.page(request, "tasks.html", title="Tasks", config_notes=notes, tag=tag,
                        status=status, statuses=STATUSES, q=q, sort=sort, desc=desc,
                        sorts=SORTS, row_html=lambda r: row_html(web, r, paused, len(view["rows"])),
                        **view)

    def task(request: Request) -> Response:
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        return task_page(web, request, config)

    def run(request: Request) -> Response:
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        run_id = int_param(request.path_params["run_id"], "run")
        try:
            view = data.run_view(config, run_id or 0)
        except data.NotFound as exc:
            raise HTTPException(404, str(exc)) from exc
        return web.page(request, "run.html", title=f"Run {run_id}",
                        shared=bool(config.state_url), **view)

    def run_log(request: Request) -> Response:
        """The run's whole log as a file (issue 24): text/plain, an attachment."""
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        run_id = int_param(request.path_params["run_id"], "run") or 0
        try:
            body = data.run_log_bytes(config, run_id)
        except data.NotFound as exc:
            raise HTTPException(404, str(exc)) from exc
        return Response(body, media_type="text/plain; charset=utf-8", headers={
            "content-disposition": f'attachment; filename="mdcron-run-{run_id}.log"'})

    def history(request: Request) -> Response:
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        q = request.query_params
        try:
            view = data.history_view(config, task=q.get("task"), status=q.get("status"),
                                     trigger=q.get("trigger"), day=q.get("day") or None,
                                     before=int_param(q.get("before"), "before"))
        except ValueError as exc:  # the page again, with what was typed and why (issue 24)
            return web.page(request, "history.html", code=400, title="History",
                            filters=dict(q), statuses=RUN_STATUSES, runs=[], next_before=None,
                            shared=bool(config.state_url),
                            form_error=f"The day {q.get('day')!r} is not a date: write it as"
                            f" YYYY-MM-DD, e.g. 2026-11-25 ({exc}).")
        return web.page(request, "history.html", title="History", filters=dict(q),
                        statuses=RUN_STATUSES, shared=bool(config.state_url), **view)

    def incidents(request: Request) -> Response:
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        return web.page(request, "incidents.html", title="Incidents",
                        incidents=data.incidents_view(config))

    def upcoming(request: Request) -> Response:
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        days = 7 if request.query_params.get("days") == "7" else 1
        day = request.query_params.get("day") or None  # the day whose fires are listed
        return web.page(request, "upcoming.html", title="Upcoming", shown_day=day,
                        **upcoming_view(config, web.clock(), days))

    def health(request: Request) -> Response:
        config, _ = data.config_or_problems(web.home)
        return web.page(request, "health.html", title="Health",
                        sessions=web.sessions.listing(),
                        **data.health_view(web.home, config, web.clock()))

    return [
        Route("/", tasks), Route("/tasks/{task_id}", task), Route("/runs/{run_id}", run),
        Route("/runs/{run_id}/log.txt", run_log),
        Route("/history", history), Route("/incidents", incidents),
        Route("/upcoming", upcoming), Route("/health", health),
    ]
