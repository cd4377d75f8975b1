"""`logs <id> [--run N] [--follow]`: a run's output log, what it means when there is none, and
following a run that is still going (issue 25 item 9).

A run's log is `logs/runs/<id>/<start>-<run>.log`, written by the tick while the task runs. A
row whose log file does not exist either never started (the script was not executable, its user
does not exist: the row's error says why) or lost its log afterwards (deleted by hand,
retention on another host): the two are told apart by whether the run produced an exit status
or any output. `--follow` prints the file as it grows until the run's row is finished, polling
both; it gives up after the run's own bound (its timeout, the kill grace and a minute), so a
row left `running` by a killed tick does not hold it forever.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import BinaryIO

from ..core import safe_fs
from ..core.clock import to_dt
from ..core.units import format_duration
from ..settings.config import Config
from ..state.store import state_store
from .usage import OK, PROBLEM

POLL = 0.2  # seconds between looks at the file and the row while following
SLACK = 60.0  # after timeout + kill_grace, the run's row is the next tick's to close


def show_log(config: Config, task_id: str, run: int | None, follow: bool,
             timeout: float) -> int:
    """Print the log of `task_id`'s latest run (or run `run`); exit status for the command.
    `timeout`: the task's timeout (the follow deadline)."""
    row, older = _row(config, task_id, run)
    if row is not None and not row.get("log_path") and row["status"] != "running":
        print(_missing(row), file=sys.stderr)  # it never got as far as a log file
        if older is not None:
            print(f"mdcron: the latest log is run {older['id']}'s: `logs {task_id} --run"
                  f" {older['id']}`", file=sys.stderr)
        return PROBLEM
    if row is None or not row.get("log_path"):
        print(f"mdcron: no log recorded for {task_id}" + (f" run {run}" if run else ""),
              file=sys.stderr)
        return PROBLEM
    path = Path(str(row["log_path"]))
    if not path.exists():
        if row["status"] == "running":  # started a moment ago: the file comes next
            return _follow(config, row, None, timeout) if follow else _running(row)
        print(_missing(row), file=sys.stderr)
        if row.get("output_tail"):
            print(row["output_tail"])
        return PROBLEM
    try:  # not followed, never waited on (a FIFO in a log's place)
        fd = safe_fs.open_at(None, str(path), os.O_RDONLY)
    except OSError as exc:
        print(f"mdcron: cannot read the log: {exc}", file=sys.stderr)
        return PROBLEM
    with os.fdopen(fd, "rb") as fh:
        _copy(fh)
        if row["status"] == "running":
            return _follow(config, row, fh, timeout) if follow else _running(row)
    return OK


def _row(config: Config, task_id: str, run: int | None) -> tuple[dict | None, dict | None]:
    """(the run asked for, or the task's latest run that is not a heal; the latest with a
    log, when that differs)."""
    if not config.state_exists:
        return None, None
    with state_store(config) as store:
        if run is not None:
            row = store.run(run)
            return (row if row and row["task_id"] == task_id else None), None
        rows = [r for r in store.history(50, task_id) if r["kind"] != "heal"]
    logged = next((r for r in rows if r["log_path"]), None)
    latest = rows[0] if rows else None
    return latest, (logged if logged is not latest else None)


def _missing(row: dict) -> str:
    """Why a run's log file is not there: it never started, or it was deleted since."""
    never = (row.get("exit_code") is None and not row.get("output_tail")
             and row["status"] in ("failed", "skipped", "crashed", "timeout", "lost"))
    if never:
        why = row.get("error") or row["status"]
        verb = "was skipped" if row["status"] == "skipped" else "never started"
        return f"mdcron: run {row['id']} of {row['task_id']} {verb}, so it has no log: {why}"
    return (f"mdcron: the log {row['log_path']} of run {row['id']} is gone (deleted by hand or"
            " by retention); its last lines were:")


def _running(row: dict) -> int:
    """A partial log: say so, and how to follow it."""
    since = format_duration(max(0.0, time.time() - float(row["started_at"])))
    print(f"mdcron: run {row['id']} is still running (started {since} ago): this log is"
          f" partial; `logs {row['task_id']} --follow` follows it to its end", file=sys.stderr)
    return OK


def _copy(fh: BinaryIO) -> int:
    n = 0
    for chunk in iter(lambda: fh.read(65536), b""):
        sys.stdout.buffer.write(chunk)
        n += len(chunk)
    sys.stdout.buffer.flush()
    return n


def _follow(config: Config, row: dict, fh: BinaryIO | None, timeout: float) -> int:
    """Print what the run appends until its row is finished (then the rest, and its end)."""
    # from now, not from the row's start: that may be an injected (`tick --now`) time
    give_up = time.monotonic() + timeout + config.kill_grace + SLACK
    path = str(row["log_path"])
    try:
        while True:
            if fh is None:
                try:
                    fh = os.fdopen(safe_fs.open_at(None, path, os.O_RDONLY), "rb")
                except FileNotFoundError:
                    pass
            if fh is not None:
                _copy(fh)
            with state_store(config) as store:
                now_row = store.run(int(row["id"])) or {"status": "gone"}
            if now_row["status"] != "running":
                if fh is not None:
                    _copy(fh)  # what was written between the last read and the end
                print(_ended(now_row), file=sys.stderr)
                return OK
            if time.monotonic() >= give_up:
                print(f"mdcron: run {row['id']} is still marked running after its timeout"
                      f" ({format_duration(timeout)}): the next tick records what became of"
                      " it; stopped following", file=sys.stderr)
                return PROBLEM
            time.sleep(POLL)
    except KeyboardInterrupt:
        return OK
    finally:
        if fh is not None:
            fh.close()


def _ended(row: dict) -> str:
    if row["status"] == "gone":
        return "mdcron: the run's row is gone (retention?)"
    when = to_dt(float(row["finished_at"])).isoformat(timespec="seconds") if row.get(
        "finished_at") else "?"
    error = f" ({row['error']})" if row.get("error") else ""
    return f"mdcron: run {row['id']} ended {row['status']}{error} at {when}"
