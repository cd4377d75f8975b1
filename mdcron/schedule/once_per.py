"""`once_per: day|week|month`: after a success in the current period (in the task's zone), the
period's later slots are recorded `skipped` ("already succeeded today"), not run and not alerted.

The period of a success is that of its slot (`scheduled_for`; a manual run's slot is the moment it
was asked), so a 23:00 run that ends after midnight still counts for its own day. Failures are
untouched: they escalate as usual, and the next slot tries again.
"""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

from ..state.store import Store

WORDS = {"day": "today", "week": "this week", "month": "this month"}
PREFIX = "already succeeded "  # every skip reason starts so (the store finds said skips by it)


def period_start(ts: float, zone: tzinfo, per: str) -> float:
    """Pure: the start (local midnight) of the day, ISO week (Monday) or month holding `ts`."""
    local = datetime.fromtimestamp(ts, zone)
    day = local.date()
    if per == "week":
        day -= timedelta(days=day.weekday())
    elif per == "month":
        day = day.replace(day=1)
    return datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()


def skip_reason(slot: float, last_success: float | None, zone: tzinfo, per: str) -> str | None:
    """Pure: why `slot` is skipped, or None when it runs (no success yet in slot's period)."""
    if last_success is None or last_success > slot:
        return None
    if period_start(last_success, zone, per) != period_start(slot, zone, per):
        return None
    at = datetime.fromtimestamp(last_success, zone).strftime("%Y-%m-%d %H:%M")
    return f"{PREFIX}{WORDS[per]} (slot {at})"


def said_before(slot: float, last_success: float | None, last_skip: float | None) -> bool:
    """Pure: this period's skip is already in history (a skipped row after the success that
    makes `slot` a skip): record it once per period, not every minute (issue 25)."""
    return (last_success is not None and last_skip is not None
            and last_success < last_skip < slot)


def last_successes(store: Store, task_ids: list[str], before: float) -> dict[str, float]:
    """The latest success slot per task, at or before `before` (any trigger, any attempt)."""
    return store.last_successes(task_ids, before)


def apply(planned: list, store: Store, config: object) -> None:
    """Turn planned runs of once_per tasks that already succeeded this period into skips
    (in place; `planned` holds dispatch.Planned). A skip already recorded this period is
    `quiet`: the tick passes its slot without a history row or a log line."""
    mine = [p for p in planned if p.task.once_per and p.action == "run"]
    if not mine:
        return
    from ..core.cron import schedule_of  # not before: a plain due tick never loads core/cron.py

    ids = [p.task.id for p in mine]
    found = last_successes(store, ids, max(p.slot for p in mine))
    said = store.last_skipped(ids, PREFIX)
    for p in mine:
        zone = schedule_of(p.task, config).zone  # type: ignore[arg-type]
        reason = skip_reason(p.slot, found.get(p.task.id), zone, p.task.once_per)
        if reason is not None:
            p.action, p.reason = "skip", reason
            p.quiet = said_before(p.slot, found.get(p.task.id), said.get(p.task.id))
