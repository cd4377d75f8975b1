"""Who did what (issue 24): every action a person takes, from the dashboard or the CLI, is
recorded in the state's `audit` table (state/audit.py) and shown by `scheduler.py audit` and
on the Task page ("Activity").

`record_action` is the one way in, for the CLI commands, the web page and the API alike. An
action that was done is never undone because its record could not be written (a busy or lost
database): the record is then told on stderr instead, and the action stands.
"""

from __future__ import annotations

import os
import sys
import time

from ..core.accounts import owner_name
from ..core.clock import to_dt
from ..settings.config import Config
from ..state.store import state_store


def record_action(config: Config, who: str, action: str, task_id: str | None = None, *,
                  detail: str | None = None, origin: str | None = None,
                  now: float | None = None) -> bool:
    """Record one action: `who` ('web session 1a2b3c4d (alice)', 'cli (alice)', ...),
    `action` (enable, disable, pause, resume, run, comment, revert-heal, resolve,
    maintenance-on, maintenance-off, stop, ...), its task, a detail (the reason, the pause's
    end, the run's pid) and where from (a remote address, a terminal). False, with a line on
    stderr, when the database would not take it."""
    at = time.time() if now is None else now
    try:
        with state_store(config) as store:
            store.add_audit(at, who, action, task_id, detail, origin)
        return True
    except Exception as exc:  # the action stands; its record is told instead
        print(f"mdcron: {action}{' of ' + task_id if task_id else ''} by {who} was done but"
              f" could not be recorded in the audit: {exc}", file=sys.stderr)
        return False


def cli_who() -> tuple[str, str]:
    """('cli (alice)', '/dev/pts/3') for an action typed in a terminal; sudo and ssh are
    named when they apply ('cli (root, sudo from alice)', 'ssh from 10.0.0.5, /dev/pts/3')."""
    who = owner_name(os.getuid())
    sudo = os.environ.get("SUDO_USER")
    if sudo and sudo != who:
        who += f", sudo from {sudo}"
    where = []
    ssh = os.environ.get("SSH_CONNECTION", "").split()
    if ssh:
        where.append(f"ssh from {ssh[0]}")
    where.append(_terminal())
    return f"cli ({who})", ", ".join(where)


def _terminal() -> str:
    for fd in (0, 1, 2):
        try:
            return os.ttyname(fd)
        except OSError:
            continue
    return "no terminal"


def record_cli(config: Config, action: str, task_id: str | None = None,
               detail: str | None = None) -> None:
    """record_action for a CLI command."""
    who, where = cli_who()
    record_action(config, who, action, task_id, detail=detail, origin=where)


def print_audit(config: Config, task_id: str | None, n: int, as_json: bool) -> None:
    """`scheduler.py audit [--task ID] [-n N] [--json]`: newest first."""
    from .render import print_json, short_time, table  # lazy: rich only for this table

    rows: list[dict] = []
    if config.state_exists:
        with state_store(config) as store:
            rows = store.audit_rows(task_id, n)
    if as_json:
        print_json([{**r, "at": to_dt(float(r["at"])).isoformat()} for r in rows])
        return
    if not rows:
        print("no actions recorded yet" + (f" for {task_id}" if task_id else ""))
        return
    table("actions, newest first", ["when", "who", "action", "task", "detail", "from"],
          [(short_time(r["at"]), r["who"], r["action"], r["task_id"] or "", r["detail"] or "",
            r["origin"] or "") for r in rows])
