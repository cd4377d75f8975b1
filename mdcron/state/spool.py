"""Results the database could not take (issue 11, issue 22): state/spool.jsonl.

When PostgreSQL cannot be reached at the moment a run ends (and connecting again failed), or a
SQLite file refuses the write (read-only, damaged, locked past its bound, a full disk), the
closing write of the run's row is appended here instead, one JSON line, and the tick stops with
a clear message. A full disk under state/ has no room for the line either: then it goes to
logs/spool.jsonl (often another filesystem, and the run's log is there anyway). The next
tick of this host writes the lines into the database before anything else (before recovery
could call the still-`running` row crashed). Every line is a
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
from ..core.outcome import Outcome, RunResult, late_note

NAME = "spool.jsonl"
READ_LIMIT = 256 << 20  # bytes of a spool read at once (a line is ~1 KiB)


def places(state_dir: Path) -> list[Path]:
    """Where spooled lines may be: state/, then the home's logs/."""
    return [state_dir / NAME, state_dir.parent / "logs" / NAME]


def _open(path: Path, root: Path) -> int:
    """For appending, owner-only; the folders walked from the home, never followed."""
    return safe_fs.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600, root=root,
                             create_dirs=True)


def add(state_dir: Path, entry: dict) -> Path | None:
    """Append one line durably (owner-only file, fsync) to the first place that takes it;
    the file it went to, or None when none could."""
    line = (json.dumps(entry, sort_keys=True) + "\n").encode()
    root = state_dir.parent
    for path in places(state_dir):
        try:
            fd = _open(path, root)
            try:
                size = os.fstat(fd).st_size
                try:
                    if os.write(fd, line) == len(line):
                        os.fsync(fd)
                        return path
                except OSError:
                    pass
                os.ftruncate(fd, size)  # no half line for replay to drop
            finally:
                os.close(fd)
            if size == 0:  # created just now: leave no empty spool behind
                safe_fs.remove_file(path, root=root)
        except OSError:
            continue
    return None


def pending(state_dir: Path) -> bool:
    return any(os.path.lexists(p) for p in places(state_dir))


def replay(store, state_dir: Path,
           recorded: list | None = None) -> list[str]:  # store: store.Store
    """Write the spooled lines into the database, oldest first; lines to say. `recorded`
    gets (run id, RunResult) of each run's closing result written now (spool_ladder.py does
    the rest of its ladder)."""
    said = []
    for path in places(state_dir):
        if os.path.lexists(path):
            said += _replay(store, path, state_dir.parent, recorded)
    return said


def _replay(store, path: Path, root: Path, recorded: list | None) -> list[str]:
    taking = f".{NAME}.{os.getpid()}"
    dir_fd = safe_fs.open_dir(root, path.parent)
    try:
        try:  # lines added from now on go to a new file
            os.rename(NAME, taking, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except FileNotFoundError:
            return []  # another tick took it
        said = []
        fd = safe_fs.open_at(dir_fd, taking, os.O_RDONLY, shown=str(path.parent / taking))
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
                if lines[i + 1:]:  # line i: finish_run spooled it again itself
                    out = _open(path, root)
                    try:
                        os.write(out, "".join(rest + "\n" for rest in lines[i + 1:]).encode())
                        os.fsync(out)
                    finally:
                        os.close(out)
                os.unlink(taking, dir_fd=dir_fd)
                raise
        os.unlink(taking, dir_fd=dir_fd)
        return said
    finally:
        os.close(dir_fd)


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
            " unreachable or refused it when it ended)" if done else
            f"run {e['run_id']}: spooled {what} not recorded: the row was closed"
            " meanwhile (by another host, or as crashed)"), result if done else None
