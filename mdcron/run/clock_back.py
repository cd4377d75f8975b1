"""The clock went back: noticed at the tick's start, cleared, said once.

One tick with the clock in 2027 (a wrong `date -s`, a bad RTC at boot, `tick --now` by
mistake), then the right time again, leaves state stamped in the future: a task's last claimed
slot, the last tick, retention's last pass. Left alone, the every-minute task would not run
until 2027, silently. The full tick compares them with now (state/idle.py declines on them, so
the idle tick never hides it): anything after now + FUTURE_SLACK is cleared
(state/clockback.py: the task counts as first seen this minute, so this minute's fire runs and
no earlier one does) and one alert says by how much the clock went back. The state is then no
longer ahead, so the next tick says nothing more.

Lazy imports: the outbox (alerts/) only when there is something to say.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.clock import to_dt
from ..settings.config import Config
from ..state.idle import FUTURE_SLACK
from ..state.store import Store
from ..state.task_state import StateRow

KIND = "clock_back"


def span(seconds: float) -> str:
    """Pure: "1 y 2 d", "3 d 4 h", "15 min": the two largest units, rounded down."""
    units = (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
    parts, rest = [], int(max(seconds, 0))
    for name, size in units:
        count, rest = divmod(rest, size)
        if count or parts:
            parts.append(f"{count} {name}")
        if len(parts) == 2:
            break
    parts = [p for p in parts if not p.startswith("0 ")] or ["0 s"]
    return " ".join(parts)


def clear(store: Store, config: Config, now: float, last: str | None,
          say: Callable[[str], None]) -> dict[str, StateRow]:
    """The tick saw state after now + FUTURE_SLACK (state.clockback.ahead; `last`: the last
    tick's stamp): clear it, say it once with one alert; the task states to use now."""
    limit = now + FUTURE_SLACK
    found = store.clear_future(now, limit)
    try:
        stamped = max(found.latest or 0.0, float(last) if last is not None else 0.0)
    except ValueError:
        stamped = found.latest or 0.0
    if stamped <= limit:
        return store.state_rows()  # another tick cleared it a moment ago, and says so
    tasks = found.tasks
    which = (f" ({len(tasks)} task(s): {', '.join(tasks[:10])}{', …' if len(tasks) > 10 else ''})"
             if tasks else "")
    line = (f"mdcron: the clock went back by {span(stamped - now)}: state was stamped up to"
            f" {to_dt(stamped):%Y-%m-%d %H:%M} UTC, now is {to_dt(now):%Y-%m-%d %H:%M} UTC;"
            f" slots after now were cleared{which}, so schedules go on from this minute")
    say(line)
    from ..alerts.notify import Alert, enqueue  # lazy: only with something to say

    body = ("T" + line.removeprefix("mdcron: t") + ". Check the machine's time (timedatectl"
            " status); runs recorded at the wrong time keep their stamps.")
    enqueue(store, config, Alert(KIND, None, "mdcron: the clock went back", body), now)
    return store.state_rows()
