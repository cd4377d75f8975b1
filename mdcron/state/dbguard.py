"""A state database that disappears is recreated empty, and that must not pass silently.

A new database makes every task "first seen now", so fires before now are never run, and the
history, failure counts, incidents and outbox are gone. When store.py creates the file it calls
`note_created`: if runs were recorded in this home before (the marker `state/database-created`
that every creation leaves, or run logs under logs/runs), it leaves a `database_recreated` note
in the new database's meta table. The next full tick (`alert_if_recreated`) turns the note into
one forced alert and removes it, whichever command created the file.

Lazy imports: the outbox (alerts/, above state in the layers) only when a recreated database
must be reported.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from ..core import safe_fs
from ..settings.config import Config
from .meta import put_metas

MARKER = "database-created"  # in state/, next to mdcron.db
META_KEY = "database_recreated"


def note_created(db: sqlite3.Connection, db_path: Path) -> None:
    """store.py, right after creating and migrating a new database file. Never raises: a
    missing alert must not stop the tick."""
    try:
        state = db_path.parent
        marker = state / MARKER
        evidence = []
        if marker.exists():
            try:
                before = json.loads(safe_fs.read_regular(marker, 1 << 16, root=state.parent)
                                    ).get("created_at", "?")
            except (OSError, ValueError, AttributeError):
                before = "?"
            evidence.append(f"a database was created here before (at {before}, {marker})")
        runs = state.parent / "logs" / "runs"
        if _has_logs(runs):
            evidence.append(f"run logs from before exist in {runs}")
        if evidence:
            put_metas(db, {META_KEY: json.dumps({"evidence": evidence, "path": str(db_path)})})
        created = datetime.now(UTC).isoformat(timespec="seconds")
        text = json.dumps({"created_at": created, "path": str(db_path)}) + "\n"
        # owner-only, as state/; inside state/ walked from the home, never through a symlink
        safe_fs.replace_file(marker, text.encode("utf-8"), root=state.parent)
    except (OSError, sqlite3.Error):
        pass


def _has_logs(runs: Path) -> bool:
    try:
        with os.scandir(runs) as tasks:
            for task in tasks:
                if task.is_dir() and any(os.scandir(task.path)):
                    return True
    except OSError:
        return False
    return False


def alert_if_recreated(store: object, config: Config, now: float,
                       say: Callable[[str], None]) -> bool:
    """One forced alert for a recreated database (see the module docstring). True if sent to
    the outbox. `store` is a store.Store."""
    from ..alerts.notify import Alert, enqueue

    raw = store.get_meta(META_KEY)  # type: ignore[attr-defined]
    if raw is None:
        return False
    try:
        note = json.loads(raw)
    except ValueError:
        note = {}
    evidence = "; ".join(note.get("evidence") or []) or "runs were recorded here before"
    body = (f"The state database {config.db_path} was missing and has been created afresh"
            f" ({evidence}). History, failure counts, incidents and unsent alerts are gone,"
            " and every task counts as first seen now: fires before now will not be run."
            " If the file was moved or can be restored from a backup, stop cron, put it back"
            " (with its -wal file) and start cron again; otherwise nothing needs doing.")
    if not store.take_meta(META_KEY):  # type: ignore[attr-defined]
        return False  # another tick took it
    enqueue(store, config, Alert("database_recreated", None,  # type: ignore[arg-type]
                                 "mdcron: the state database was recreated", body,
                                 forced=True), now)
    say(f"mdcron: {body}")
    return True
