"""A run's row as people and programs read it: the JSON of `history --json`, `show --json` and
the dashboard's API, and the note its `extra` carries.
"""

from __future__ import annotations

import json


def history_json(row: dict) -> dict:
    """A run row as `history --json`, `show --json` and the dashboard's API give it."""
    from .task_text import iso  # lazy: only when a row is shown

    out = {k: v for k, v in row.items() if k not in ("owner_pid", "owner_start", "owner_boot")}
    for key in ("scheduled_for", "started_at", "finished_at"):
        out[key] = iso(row[key])  # type: ignore[arg-type]
    out["run_id"] = row["id"]
    out["note"] = run_note(row) or None  # e.g. "self-heal not attempted: ..."
    try:  # issue 25: an object, not JSON inside a string
        out["extra"] = json.loads(row["extra"]) if row.get("extra") else None
    except (TypeError, ValueError):
        pass  # not JSON: kept as the text it is
    return out


def run_note(row: dict) -> str:
    """The note a run's `extra` carries ("self-heal not attempted: ..."), or ""."""
    try:
        extra = json.loads(str(row.get("extra") or "{}"))
    except ValueError:
        return ""
    return str(extra.get("note") or "") if isinstance(extra, dict) else ""
