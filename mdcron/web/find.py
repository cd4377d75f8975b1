"""Find and compare (issue 24 item 9): the Tasks page's search, sort and status filter (the
server applies them too, so a reload or the live refresh keeps what the script shows), each
task's last runs as dots, and who holds each `uses:` resource now.

Lazy imports: none; the state is read through the store the caller opens.
"""

from __future__ import annotations

from datetime import datetime

from ..run.resources import holders
from ..settings.config import Config
from ..state.store import state_store

DOTS = 10  # runs per task on the Tasks page
SORTS = ("id", "title", "last", "status", "next", "fails")
# the dot's class: one letter keeps 10 dots x 1,000 tasks small (style.css colours them)
DOT_CLASS = {"success": "o", "failed": "x", "timeout": "t", "crashed": "x", "lost": "l",
             "skipped": "s", "running": "r"}


def matches(row: dict, q: str) -> bool:
    """Case-insensitive: the words of `q` each in the id, the title or a tag."""
    hay = " ".join([row["id"], row.get("title") or "", *row.get("tags", [])]).lower()
    return all(word in hay for word in q.lower().split())


def _stamp(value: str | None) -> float:
    return datetime.fromisoformat(value).timestamp() if value else 0.0


def sort_keys(row: dict, status: str) -> dict[str, object]:
    """The values each sortable column orders by (also data-k in the page for the script)."""
    return {"id": row["id"].lower(), "title": (row.get("title") or "").lower(),
            "last": _stamp(row.get("last_run")), "status": status,
            "next": _stamp(row.get("next_run")) or float("inf"),
            "fails": row.get("consecutive_failures") or 0}


def sort_rows(rows: list[dict], by: str | None, desc: bool) -> list[dict]:
    if by not in SORTS:
        return rows
    return sorted(rows, key=lambda r: r["keys"][by], reverse=desc)


# The dots this process read, valid while no run started or ended: (state, runs_version) ->
# {task id: [(run id, status, duration_ms)]}. The Tasks page is polled every few seconds.
_DOTS: dict[str, object] = {"key": None, "dots": {}}


def recent_runs(config: Config, task_ids: list[str]) -> dict[str, dict]:
    """Each task's last DOTS runs, oldest first, as dot_groups."""
    if not config.state_exists or not task_ids:
        return {}
    with state_store(config) as store:
        key = (str(config.state_url or config.db_path), store.runs_version())
        if _DOTS["key"] != key:
            _DOTS.update(key=key, dots={})
        dots: dict = _DOTS["dots"]  # type: ignore[assignment]
        missing = [t for t in task_ids if t not in dots]
        if missing:
            found = store.recent_runs(missing, DOTS)
            for t in missing:
                dots[t] = dot_groups([r[1] for r in reversed(found.get(t, []))])
    return {t: dots[t] for t in task_ids}


def dot_groups(statuses: list[str]) -> dict:
    """Dots as runs of one colour ({cls, n}) and a short summary for the tooltip: 1,000 rows
    of 10 single elements would add 180 KiB to the Tasks page."""
    groups: list[dict] = []
    for s in statuses:
        cls = DOT_CLASS.get(s, "l")
        if groups and groups[-1]["cls"] == cls:
            groups[-1]["n"] += 1
        else:
            groups.append({"cls": cls, "n": 1})
    counts: dict[str, int] = {}
    for s in statuses:
        counts[s] = counts.get(s, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda i: -i[1]))
    return {"groups": groups, "n": len(statuses), "summary": summary}


def resource_holders(config: Config) -> dict[str, list[dict]]:
    """Every configured resource with the runs holding its units now (task, run, since)."""
    out: dict[str, list[dict]] = {name: [] for name in sorted(config.resources)}
    for h in holders(config):
        info = h.info
        out.setdefault(h.resource, []).append({
            "unit": h.unit, "task_id": info.task_id if info else None,
            "run_id": info.run_id if info else None,
            "since": info.started_at if info else None})
    return out
