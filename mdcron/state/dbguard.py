"""A state database that disappears is recreated empty, and that must not pass silently, nor
run a slot twice.

A new database makes every task "first seen now", so fires before now are never run, and the
history, failure counts, incidents and outbox are gone. When store.py creates the file (or finds
it empty: a zero-byte file is a lost database, not a new one) it calls `note_created`: if runs
were recorded in this home before (the marker `state/database-created` that every creation
leaves, or run logs under logs/runs), it leaves a `database_recreated` note in the new
database's meta table. The next full tick turns the note into one forced alert and removes it
(alerts/recreated.py), whichever command created the file.

"First seen now" still lets the current minute's slot run, and the lost database may have run
it already. So the marker also carries the latest slot ever claimed (`note_claims`, called by
Store.claim_slots: one small file write per tick that claims); without one, the newest run log's
start stands in. A recreated database gets it as `database_claimed_until`, and the first full
tick (`hold_back`) moves every task's not_before past it: no slot at or before it is claimed
again; the next one runs as usual.

A tick that knows a task is due writes the marker ahead (`note_ahead`: this minute, in a thread,
so its two fsyncs overlap the loading instead of delaying the first task; issue 27), as the
daemon's held tick does (cli/warm.py): a marker ahead only holds back a slot after a lost
database, never reruns one. Store.claim_slots waits for it (`noted`) before its own note, so
the marker still holds every won slot before the claim returns and any task starts.
"""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from ..core import safe_fs
from ..core.background import Background
from ..core.clock import minute_floor
from .meta import put_metas, take_meta

MARKER = "database-created"  # in state/, next to mdcron.db
META_KEY = "database_recreated"
HOLD_KEY = "database_claimed_until"  # the latest slot the lost database had claimed
LOG_STAMP = "%Y%m%dT%H%M%SZ"  # run/attempt.log_file names a run's log <stamp>-<run id>.log


def note_created(db: sqlite3.Connection, db_path: Path) -> None:
    """store.py, right after creating and migrating a new (or empty) database file. Never
    raises: a missing alert must not stop the tick."""
    try:
        state = db_path.parent
        marker = state / MARKER
        evidence = []
        before = _read_marker(marker)
        if before is not None:
            evidence.append(f"a database was created here before (at"
                            f" {before.get('created_at', '?')}, {marker})")
        runs = state.parent / "logs" / "runs"
        if _has_logs(runs):
            evidence.append(f"run logs from before exist in {runs}")
        claimed = _number((before or {}).get("claimed_until"))
        if claimed is None and evidence:
            claimed = _newest_log(runs)
        if evidence:
            note = {META_KEY: json.dumps({"evidence": evidence, "path": str(db_path)})}
            if claimed is not None:
                note[HOLD_KEY] = repr(claimed)
            put_metas(db, note)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        _write_marker(marker, {"created_at": created, "path": str(db_path),
                               "claimed_until": claimed})
    except (OSError, sqlite3.Error):
        pass


def note_claims(db_path: Path, slot: float) -> None:
    """Store.claim_slots, after a claim was won: the marker remembers the latest slot claimed
    (never moved back). Never raises; without the marker's folder, nothing is written."""
    try:
        marker = db_path.parent / MARKER
        data = _read_marker(marker) or {"created_at": "?", "path": str(db_path)}
        known = _number(data.get("claimed_until"))
        if known is not None and known >= slot:
            return
        data["claimed_until"] = slot
        _write_marker(marker, data)
    except OSError:
        pass


_ahead = Background("dbguard")  # note_ahead's write, until noted() waits for it


def note_ahead(db_path: Path, slot: float) -> None:
    """note_claims(db_path, slot) in a thread, started now; noted() waits for it."""
    _ahead.start(note_claims, db_path, slot)


def noted() -> None:
    """Wait for note_ahead's write (a no-op without one)."""
    _ahead.join()


def hold_back(store: object, until: float, now: float) -> None:
    """The first full tick on a recreated database: no task may claim a slot at or before
    `until` (capped at now's minute: a marker from a clock that went back does not stop
    schedules for a year). Idempotent, so two ticks racing both apply it. `store`: a Store."""
    floor = min(until, minute_floor(now)) + 0.001  # after that slot, before the next fire
    with store.write() as db:  # type: ignore[attr-defined]
        db.execute("UPDATE task_state SET not_before = ? WHERE not_before < ?", (floor, floor))
        take_meta(db, HOLD_KEY)


def _read_marker(marker: Path) -> dict | None:
    try:  # inside state/ walked from the home, never through a symlink or a FIFO
        data = json.loads(safe_fs.read_regular(marker, 1 << 16, root=marker.parent.parent))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_marker(marker: Path, data: dict) -> None:
    # owner-only, as state/; inside state/ walked from the home, never through a symlink
    safe_fs.replace_file(marker, (json.dumps(data) + "\n").encode("utf-8"),
                         root=marker.parent.parent)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _newest_log(runs: Path) -> float | None:
    """When the newest run log's run started (its name's stamp), None without logs."""
    newest = None
    try:
        with os.scandir(runs) as tasks:
            for task in tasks:
                if not task.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(task.path) as logs:
                    for log in logs:
                        try:
                            at = datetime.strptime(log.name[:16], LOG_STAMP).replace(tzinfo=UTC)
                        except ValueError:
                            continue
                        newest = max(newest or 0.0, at.timestamp())
    except OSError:
        return newest
    return newest


def _has_logs(runs: Path) -> bool:
    try:
        with os.scandir(runs) as tasks:
            for task in tasks:
                if task.is_dir() and any(os.scandir(task.path)):
                    return True
    except OSError:
        return False
    return False
