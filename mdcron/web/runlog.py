"""A running run, followed and stopped (issue 24): its log from a byte offset for the live
tail (static/logtail.js), and the Stop button (run/stop.py: TERM → grace → KILL of the run's
process group, recorded "stopped from the dashboard by …" on its row and in its log).

Lazy imports: run/stop.py loads when a Stop is asked for.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..cli.audit import record_action
from ..settings.config import Config
from . import data
from .logread import read_chunk
from .pages import config_or_409 as _config
from .pages import int_param


def _row(config: Config, run_id: int) -> dict:
    try:
        return data.run_row(config, run_id)
    except data.NotFound as exc:
        raise HTTPException(404, str(exc)) from exc


def log_since(config: Config, run_id: int, offset: int | None) -> dict:
    """What the tail needs: the text since `offset`, the next offset, and whether the run is
    over (its status is read before the file, so a finished run's last bytes are included)."""
    row = _row(config, run_id)
    finished = row["status"] != "running"
    path = row.get("log_path")
    chunk = read_chunk(str(path), config.logs_dir, offset, final=finished) if path else None
    if chunk is None:
        return {"text": "", "offset": offset or 0, "finished": finished, "skipped": False,
                "status": row["status"]}
    return {"text": chunk.text, "offset": chunk.offset, "finished": finished,
            "skipped": chunk.skipped, "status": row["status"], "size": chunk.size}


async def _stop(web, request: Request) -> tuple[Config, int, list[str]]:
    from ..run.stop import NotRunning, stop_run  # lazy: only when a Stop is pressed

    await web.form(request)
    run_id = int_param(request.path_params["run_id"], "run") or 0
    config = _config(web)
    row = await run_in_threadpool(_row, config, run_id)
    if row["status"] != "running":
        raise HTTPException(409, f"run {run_id} is not running (it is {row['status']})")
    by, origin = web.who(request)  # the session's label and account (audit, issue 24)
    try:  # TERM, grace, KILL: seconds; never on the event loop
        done = await run_in_threadpool(stop_run, config, str(row["task_id"]), run_id, by,
                                       web.clock())
    except NotRunning as exc:
        raise HTTPException(409, str(exc)) from exc
    await run_in_threadpool(record_action, config, by, "stop", str(row["task_id"]),
                            detail=f"stopped run {run_id} from the dashboard", origin=origin,
                            now=web.clock())
    return config, run_id, done


def routes(web) -> list[Route]:
    async def log(request: Request) -> Response:
        run_id = int_param(request.path_params["run_id"], "run") or 0
        offset = int_param(request.query_params.get("offset"), "offset")
        body = await run_in_threadpool(log_since, _config(web), run_id, offset)
        return JSONResponse(body)

    async def stop_page(request: Request) -> Response:
        _, run_id, _ = await _stop(web, request)
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    async def stop_api(request: Request) -> Response:
        _, run_id, done = await _stop(web, request)
        return JSONResponse({"stopped": True, "run_id": run_id, "done": done})

    return [
        Route("/api/runs/{run_id}/log", log),
        Route("/runs/{run_id}/stop", stop_page, methods=["POST"]),
        Route("/api/runs/{run_id}/stop", stop_api, methods=["POST"]),
    ]
