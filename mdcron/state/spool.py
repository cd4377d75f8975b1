"""Results the shared database could not take (issue 11): state/spool.jsonl.

When PostgreSQL cannot be reached at the moment a run ends (and connecting again failed), the
closing write of the run's row is appended here instead, one JSON line, and the tick stops with
a clear message. The next tick of this host writes the lines into the database before anything
else (before recovery could call the still-`running` row crashed). Every line is a
check-and-set on a row still `running`, so replaying twice, or after another host closed the row
(its lease expired), changes nothing: the newer row is never overwritten. A run's result
written from here then gets the rest of its ladder (spool_ladder.py: the failure count, a
suspension, the alert; no retry or heal).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..core.outcome import Outcome, RunResult, late_note

NAME = "spool.jsonl"


def add(state_dir: Path, entry: dict) -> None:
    """Append one line durably (owner-only file, fsync)."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(state_dir / NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def pending(state_dir: Path) -> bool:
    return (state_dir / NAME).exists()


def replay(store, state_dir: Path,
           recorded: list | None = None) -> list[str]:  # store: store.Store
    """Write the spooled lines into the database, oldest first; lines to say. `recorded`
    gets (run id, RunResult) of each run's closing result written now (spool_ladder.py does
    the rest of its ladder)."""
    path = state_dir / NAME
    if not path.exists():
        return []
    taking = path.with_name(f".{NAME}.{os.getpid()}")
    try:
        os.replace(path, taking)  # lines added from now on go to a new file
    except FileNotFoundError:
        return []  # another tick took it
    said = []
    lines = taking.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        try:
            e = json.loads(line)
        except ValueError:
            said.append(f"spool: an unreadable line was dropped: {line[:80]!r}")
            continue
        try:
            line, result = _write(store, e)
            said.append(line)
            if result is not None and recorded is not None:
                recorded.append((e["run_id"], result))
        except BaseException:  # the database went away again: keep what is left
            for rest in lines[i + 1:]:
                with open(state_dir / NAME, "a", encoding="utf-8") as handle:
                    handle.write(rest + "\n")
            taking.unlink()
            raise
    taking.unlink()
    return said


def _write(store, e: dict):  # -> (line, the RunResult written or None)
    if e.get("op") == "finish":
        result = RunResult(Outcome(e["outcome"]), exit_code=e.get("exit_code"),
                           fail_reason=e.get("fail_reason"), duration=e.get("duration", 0.0),
                           output_tail=e.get("output_tail", ""),
                           log_path=Path(e["log_path"]) if e.get("log_path") else None,
                           extra=e.get("extra") or {})
        done = store.finish_run(e["run_id"], result, e["at"])
        row = None if done else store.run(e["run_id"])
        if row is not None and row["status"] in ("lost", "timeout"):  # issue 23: another
            store.add_note(e["run_id"], late_note(store.host, result, e["at"]))  # host's verdict
            return (f"run {e['run_id']}: spooled {e['outcome']} kept as a note beside the"
                    f" row another host closed {row['status']}"), None
    elif e.get("op") == "late":  # issue 23: a fenced-off holder's result (ladder.py)
        store.keep_late(e["run_id"], e["reason"], e["note"], e["at"])
        return f"run {e['run_id']}: its late result was kept from the spool as a note", None
    else:
        result = None  # a recovery's verdict, not a ladder's result
        done = store.end_running(e["run_id"], Outcome(e["status"]), e["reason"], e["now"],
                                 e.get("ended_at"), e.get("unobserved", False))
    what = e.get("outcome") or e.get("status")
    return (f"run {e['run_id']}: {what} recorded from the spool (the database was"
            " unreachable when it ended)" if done else
            f"run {e['run_id']}: spooled {what} not recorded: the row was closed"
            " meanwhile (by another host, or as crashed)"), result if done else None
