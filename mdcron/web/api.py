"""/api/: the pages as JSON, with the field names of the CLI's --json (`list`, `history`,
`show`, `incidents`, `doctor`), so scripts and the page read one source. The GET handlers are
plain functions, run in a worker thread (as pages.py).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import data
from .actions import run_now as start
from .pages import STATUSES, int_param, task_id
from .upcoming import upcoming_view


def _config(web):
    config, notes = data.config_or_problems(web.home)
    if config is None:
        raise HTTPException(409, "the config has problems: " + "; ".join(notes))
    return config


def routes(web) -> list[Route]:
    def tasks(request: Request) -> Response:
        q = request.query_params
        if q.get("status") and q["status"] not in STATUSES:
            raise HTTPException(400, f"status must be one of {', '.join(STATUSES)}")
        view = data.tasks_view(_config(web), web.clock(), q.get("tag"), q.get("status"),
                               (q.get("q") or "")[:200])
        for row in view["rows"]:
            row.pop("keys", None)  # the page's sort keys; the JSON keeps the CLI's fields
        return JSONResponse(view["rows"])

    def task(request: Request) -> Response:
        try:
            return JSONResponse(data.task_view(_config(web), task_id(request), web.clock()))
        except data.NotFound as exc:
            raise HTTPException(404, str(exc)) from exc

    def history(request: Request) -> Response:
        q = request.query_params
        try:
            view = data.history_view(_config(web), task=q.get("task"), status=q.get("status"),
                                     trigger=q.get("trigger"), day=q.get("day") or None,
                                     before=int_param(q.get("before"), "before"))
        except ValueError as exc:
            raise HTTPException(400, f"day must be YYYY-MM-DD ({exc})") from exc
        return JSONResponse(view)

    def run(request: Request) -> Response:
        run_id = int_param(request.path_params["run_id"], "run") or 0
        try:
            return JSONResponse(data.run_view(_config(web), run_id))
        except data.NotFound as exc:
            raise HTTPException(404, str(exc)) from exc

    def incidents(request: Request) -> Response:
        return JSONResponse(data.incidents_view(_config(web)))

    def upcoming(request: Request) -> Response:
        days = 7 if request.query_params.get("days") == "7" else 1
        return JSONResponse(upcoming_view(_config(web), web.clock(), days))

    def health(request: Request) -> Response:
        config, _ = data.config_or_problems(web.home)
        return JSONResponse(data.health_view(web.home, config, web.clock()))

    async def run_now(request: Request) -> Response:
        await web.form(request)
        tid = task_id(request)
        pid = await web.work(lambda: start(web, _config(web), tid, request))
        return JSONResponse({"started": True, "pid": pid}, status_code=202)

    return [
        Route("/api/tasks", tasks), Route("/api/tasks/{task_id}", task),
        Route("/api/tasks/{task_id}/run", run_now, methods=["POST"]),
        Route("/api/history", history), Route("/api/runs/{run_id}", run),
        Route("/api/incidents", incidents), Route("/api/upcoming", upcoming),
        Route("/api/health", health),
    ]
