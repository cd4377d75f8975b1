"""The HTML pages (GET only: they change nothing). Each has a `live` block the poller
(static/live.js) fetches again every few seconds. The handlers are plain functions: Starlette
runs them in a worker thread, so a page waiting on the database or the disk never holds up
the event loop (issue 24)."""

from __future__ import annotations

import re

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import data

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


def config_or_page(web, request: Request):
    """(config, warnings), or a page that shows why the config cannot be used."""
    config, notes = data.config_or_problems(web.home)
    if config is None:
        return None, web.page(request, "broken.html", problems=notes, title="Config problem")
    return config, notes


def routes(web) -> list[Route]:
    def tasks(request: Request) -> Response:
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        tag = request.query_params.get("tag") or None
        status = request.query_params.get("status") or None
        view = data.tasks_view(config, web.clock(), tag, status)
        return web.page(request, "tasks.html", title="Tasks", config_notes=notes, tag=tag,
                        status=status, statuses=STATUSES, **view)

    def task(request: Request) -> Response:
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        try:
            view = data.task_view(config, task_id(request), web.clock())
        except data.NotFound as exc:
            raise HTTPException(404, str(exc)) from exc
        return web.page(request, "task.html", title=view["task"]["id"],
                        shared=bool(config.state_url), **view)

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

    def history(request: Request) -> Response:
        config, notes = config_or_page(web, request)
        if config is None:
            return notes
        q = request.query_params
        try:
            view = data.history_view(config, task=q.get("task"), status=q.get("status"),
                                     trigger=q.get("trigger"), day=q.get("day") or None,
                                     before=int_param(q.get("before"), "before"))
        except ValueError as exc:
            raise HTTPException(400, f"day must be YYYY-MM-DD ({exc})") from exc
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
        return web.page(request, "upcoming.html", title="Upcoming",
                        **data.upcoming_view(config, web.clock(), days))

    def health(request: Request) -> Response:
        config, _ = data.config_or_problems(web.home)
        return web.page(request, "health.html", title="Health",
                        sessions=web.sessions.listing(),
                        **data.health_view(web.home, config, web.clock()))

    return [
        Route("/", tasks), Route("/tasks/{task_id}", task), Route("/runs/{run_id}", run),
        Route("/history", history), Route("/incidents", incidents),
        Route("/upcoming", upcoming), Route("/health", health),
    ]
