"""One forced alert for a state database that was recreated (state/dbguard.py leaves the note;
the next full tick turns it into this alert and removes it, whichever command created the file).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

from ..core.clock import minute_floor
from ..settings.config import Config
from ..state.dbguard import HOLD_KEY, META_KEY
from ..state.store import Store
from .notify import Alert, enqueue


def alert_if_recreated(store: Store, config: Config, now: float,
                       say: Callable[[str], None]) -> bool:
    """One forced alert for a recreated database (see the module docstring). True if sent to
    the outbox."""
    raw = store.get_meta(META_KEY)
    if raw is None:
        return False
    try:
        note = json.loads(raw)
    except ValueError:
        note = {}
    evidence = "; ".join(note.get("evidence") or []) or "runs were recorded here before"
    held = store.get_meta(HOLD_KEY)
    again = ""
    if held is not None:
        stamp = datetime.fromtimestamp(min(float(held), minute_floor(now)), UTC)
        again = (f" No slot up to {stamp:%Y-%m-%d %H:%M} UTC (the latest the lost database had"
                 " claimed) runs again.")
    body = (f"The state database {config.db_path} was missing or empty and has been created"
            f" afresh ({evidence}). History, failure counts, incidents and unsent alerts are"
            " gone, and every task counts as first seen now: fires before now will not be run."
            + again +
            " If the file was moved or can be restored from a backup, stop cron, put it back"
            " (with its -wal file) and start cron again; otherwise nothing needs doing.")
    if not store.take_meta(META_KEY):
        return False  # another tick took it
    enqueue(store, config, Alert("database_recreated", None,
                                 "mdcron: the state database was recreated", body,
                                 forced=True), now)
    say(f"mdcron: {body}")
    return True
