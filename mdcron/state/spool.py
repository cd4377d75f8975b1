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

from ..core import safe_fs
from ..core.outcome import Outcome, RunResult

NAME = "spool.jsonl"
READ_LIMIT = 256 << 20  # bytes of a spool read at once (a line is ~1 KiB)


def _append(state_dir: Path, text: str) -> None:
    """Append durably (owner-only file, fsync); state/ walked from the home, never followed."""
    fd = safe_fs.open_file(state_dir / NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600,
                           root=state_dir.parent, create_dirs=True)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def add(state_dir: Path, entry: dict) -> None:
    """Append one line durably (owner-only file, fsync)."""
    _append(state_dir, json.dumps(entry, sort_keys=True) + "\n")


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
    taking = f".{NAME}.{os.getpid()}"
    dir_fd = safe_fs.open_dir(state_dir.parent, state_dir)
    try:
        return _replay(store, state_dir, dir_fd, taking, recorded)
    finally:
        os.close(dir_fd)


def _replay(store, state_dir: Path, dir_fd: int, taking: str, recorded: list | None) -> list[str]:
    try:  # lines added from now on go to a new file
        os.rename(NAME, taking, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileNotFoundError:
        return []  # another tick took it
    said = []
    fd = safe_fs.open_at(dir_fd, taking, os.O_RDONLY, shown=str(state_dir / taking))
    with os.fdopen(fd, "rb") as handle:
        lines = handle.read(READ_LIMIT).decode("utf-8").splitlines()
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
            if lines[i + 1:]:
                _append(state_dir, "".join(rest + "\n" for rest in lines[i + 1:]))
            os.unlink(taking, dir_fd=dir_fd)
            raise
    os.unlink(taking, dir_fd=dir_fd)
    return said


def _write(store, e: dict):  # -> (line, the RunResult written or None)
    if e.get("op") == "finish":
        result = RunResult(Outcome(e["outcome"]), exit_code=e.get("exit_code"),
                           fail_reason=e.get("fail_reason"), duration=e.get("duration", 0.0),
                           output_tail=e.get("output_tail", ""),
                           log_path=Path(e["log_path"]) if e.get("log_path") else None,
                           extra=e.get("extra") or {})
        done = store.finish_run(e["run_id"], result, e["at"])
    else:
        result = None  # a recovery's verdict, not a ladder's result
        done = store.end_running(e["run_id"], Outcome(e["status"]), e["reason"], e["now"],
                                 e.get("ended_at"), e.get("unobserved", False))
    what = e.get("outcome") or e.get("status")
    return (f"run {e['run_id']}: {what} recorded from the spool (the database was"
            " unreachable when it ended)" if done else
            f"run {e['run_id']}: spooled {what} not recorded: the row was closed"
            " meanwhile (by another host, or as crashed)"), result if done else None
