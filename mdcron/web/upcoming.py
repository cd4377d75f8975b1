"""The Upcoming page (issue 24: fast at 1,000 tasks over 7 days, and a compact timeline):
every enabled task's fires in the window, grouped by local day and hour, with a 24-cell strip
per day of how busy each hour is.

Lazy imports: the cron maths only when a page is asked for.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ..core.clock import to_dt
from ..settings.config import Config
from ..tasks.run_keys import start_offset
from ..tasks.task import Task
from .data import load_all

# Fires per (schedule, zone) as this process last listed them: (from, horizon, fires, whole).
# Valid while no fire between `from` and now was dropped from the front past the cap and the
# horizon still covers the window asked; a minute later only tasks that fired since are redone.
_FIRES: dict[tuple[str, str | None], tuple[float, float, list[datetime], bool]] = {}


def _fires(task: Task, config: Config, now: float, end: float, cap: int) -> list[datetime]:
    """Fires in (now, end], at most `cap`, earliest first."""
    from ..core.cron import schedule_of

    key = (task.schedule, task.timezone or config.timezone)
    mine = _FIRES.get(key)
    if mine is not None:
        start, horizon, fires, whole = mine
        ahead = [f for f in fires if f.timestamp() > now]
        if start <= now and end <= horizon and (whole or len(ahead) >= cap):
            return [f for f in ahead if f.timestamp() <= end][:cap]
    horizon = end + 86400.0
    sched = schedule_of(task, config)
    fires, t = [], to_dt(now)
    whole = False
    while len(fires) < cap + 60:
        nxt = sched.next_after(t)
        if nxt is None or nxt.timestamp() > horizon:
            whole = True
            break
        fires.append(nxt)
        t = nxt
    if len(_FIRES) > 20_000:
        _FIRES.clear()
    _FIRES[key] = (now, horizon, fires, whole)
    return [f for f in fires if f.timestamp() <= end][:cap]


def upcoming_view(config: Config, now: float, days: int) -> dict:
    """Fires of every enabled task in the next `days`, grouped by local day and hour.

    A downstream (`after:`) has no fires of its own: it is listed under each fire of its
    upstreams as "then …"; a `once_per` task is marked, since only its first success counts."""
    loaded = load_all(config)
    end = now + days * 86400
    hours: dict[str, list[dict]] = {}
    labels: dict[tuple[int, int, int, int], str] = {}
    cap = 48 if days <= 1 else 30  # per task: an every-minute task would fill the page
    total = 0
    enabled = [t for t in loaded.tasks if t.enabled]
    downstream: dict[str, list[str]] = {}
    for task in enabled:
        for up in task.after:
            downstream.setdefault(up, []).append(task.id)
    for task in enabled:
        if task.after:
            continue
        then = sorted(downstream.get(task.id, []))
        offset = timedelta(seconds=start_offset(task, config))  # issue 26: the real start
        for fire in _fires(task, config, now, end, cap):
            nxt = fire + offset
            local = nxt.astimezone()
            hour = (local.year, local.month, local.day, local.hour)  # strftime costs 4x more
            label = labels.get(hour)
            if label is None:
                label = labels[hour] = local.strftime("%Y-%m-%d %H:00")
            hours.setdefault(label, []).append(
                {"id": task.id, "at": f"{local.hour:02d}:{local.minute:02d}"
                 + (f":{local.second:02d}" if offset else ""),
                 "iso": nxt.isoformat(), "once_per": task.once_per, "then": then})
            total += 1
    for items in hours.values():
        items.sort(key=lambda i: i["at"])
    by_day: dict[str, dict] = {}
    for hour, items in sorted(hours.items()):
        day = by_day.setdefault(hour[:10], {"count": 0, "hours": {}, "label": datetime.strptime(
            hour[:10], "%Y-%m-%d").strftime("%a %d %b")})
        day["hours"][hour[11:]] = items
        day["count"] += len(items)
    for day in by_day.values():  # 24 cells: how busy each hour is (the timeline's strip)
        busiest = max(len(v) for v in day["hours"].values())
        day["strip"] = [(h, len(day["hours"].get(f"{h:02d}:00", [])),
                         round(4 * len(day["hours"].get(f"{h:02d}:00", [])) / busiest))
                        for h in range(24)]
    from ..schedule.pause import maintenance

    return {"hours": dict(sorted(hours.items())), "days_view": by_day, "total": total,
            "maintenance": maintenance(str(config.home)),
            "days": days, "cap": cap,
            "zone": to_dt(now).astimezone().tzname()}  # the hours are the server's (labelled)
