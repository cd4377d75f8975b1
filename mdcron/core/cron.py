"""Schedule maths: cron, macros, @every, @at; time zones, DST, due-ness. Pure: `now` comes in.
Wall times in a zone are placed by wall_time.py; due-ness is due.py's (both importable here).

Forms (parse_schedule):
  five-field cron  `0 6 * * 1-5`: numbers, names (jan, mon), ranges, steps, lists. When both
                   day fields are restricted a day matches either; when one starts with `*`,
                   both must match (Vixie/Debian cron).
  macros           @hourly @daily @midnight @weekly @monthly @yearly @annually
  interval         `@every 15m`: fires at whole multiples of the interval since the Unix epoch
                   (1970-01-01T00:00Z). Stateless, elapsed time; the zone and DST play no part.
  one-shot         `@at 2026-12-01T09:00`: once. With an offset it is that instant; without one
                   it is wall time in the zone, placed like a fixed-time cron fire (below).

DST policy (Debian cron's, also cronsim's). A cron job is *fixed-time* unless its minute or
its hour field starts with `*` (so @hourly is not fixed, @daily is). Each matching wall time w:
  - w occurs once: the fire is that instant.
  - w is skipped by a spring-forward gap: a fixed-time job fires once at the transition instant,
    the first real instant after the gap (several w in one gap make one fire); any other job
    does not fire.
  - w occurs twice (fall back): a fixed-time job fires in the first pass only; any other job
    fires in both passes.
Fire times come out as aware UTC datetimes, sorted and unique. Cron fields are matched by
croniter in naive wall-clock time (imported lazily), or, for a spec that matches the same
minutes every day, by wall_steps.py; wall times are mapped to instants here.
Assumption: a zone's offset changes by less than 3 h at a time and not twice within 3 h.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, tzinfo
from functools import lru_cache

from mdcron.core.due import Decision as Decision  # re-exported: due-ness lives in due.py
from mdcron.core.due import _show as _show  # run/tick.py words a due slot as decide() does
from mdcron.core.due import decide as decide
from mdcron.core.limits import EARLIEST, LATEST, RANGE_TEXT, InstantError, check_instant
from mdcron.core.units import DurationError, parse_duration
from mdcron.core.wall_time import ScheduleError, as_utc, first_pass, last_pass, resolve_zone

from .records import dataclass
from .wall_steps import steps

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:  # types only: schedule maths imports no model or settings module
    from typing import Any, Protocol

    from mdcron.settings.config import Config
    from mdcron.tasks.task import Task
else:
    Protocol = object  # a protocol is for the type checker: at run time a plain base class

_MARGIN = timedelta(hours=3)  # bound on an offset change; see the module docstring
_MINUTE = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SCAN_LIMIT = 20_000  # matching wall times one scan may pass over; never reached in practice
MAX_INTERVAL = timedelta(days=366)  # `@every` at most; longer is surely a typo
_LAST = LATEST - timedelta(microseconds=1)  # the last instant a fire may be at

_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_FORMS = ("five cron fields like '0 6 * * 1-5', a macro like @daily, '@every 15m' or "
          "'@at 2026-12-01T09:00'")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (name, lowest, highest, names -> numbers, what is allowed)
_FIELDS: tuple[tuple[str, int, int, dict[str, int], str], ...] = (
    ("minute", 0, 59, {}, "0-59"),
    ("hour", 0, 23, {}, "0-23"),
    ("day-of-month", 1, 31, {}, "1-31"),
    ("month", 1, 12, {n: i for i, n in enumerate(_MONTHS, 1)}, "1-12 or jan-dec"),
    ("day-of-week", 0, 7, {n: i for i, n in enumerate(_DAYS)}, "0-7 or sun-sat"),
)
_ITEM = r"(?i)(\*|[0-9a-z]+)(?:-([0-9a-z]+))?(?:/([0-9]+))?"  # re caches it (units.py)


# ---------------------------------------------------------------- schedules


class Schedule(Protocol):
    """A parsed schedule. Fire times are aware UTC datetimes; arguments must be aware."""

    @property
    def expression(self) -> str: ...  # as written (outer whitespace stripped)
    @property
    def zone(self) -> tzinfo: ...
    @property
    def fixed_time(self) -> bool: ...  # follows the fixed-time DST policy (module docstring)

    def next_after(self, t: datetime) -> datetime | None:
        """The first fire strictly after t; None if it never fires again."""
        ...

    def latest_at_or_before(self, t: datetime) -> datetime | None:
        """The latest fire at or before t; None if there is none."""
        ...


def _croniter(spec: str, day_or: bool) -> Any:
    """A croniter over naive wall time, reused per (spec, thread): building one costs ~0.1 ms.
    Stateful, so every scan repositions it first."""
    return _croniter_for(spec, day_or, threading.get_ident())


def _load_croniter() -> None:
    """Import croniter without its import-time 32-bit probe running `file -b <python>` (a
    fork+exec through platform.architecture, 15-90 ms per tick on a 2-core machine): while it
    imports, platform.architecture answers from the pointer size, the probe's own first test."""
    if "croniter" in sys.modules:
        return
    import platform  # lazy: only while croniter loads (which imports it anyway)
    import struct  # lazy: as platform (issue 27: a schedule wall_steps steps needs neither)

    real = platform.architecture
    platform.architecture = lambda *_a, **_k: (f"{struct.calcsize('P') * 8}bit", "")
    try:
        # lazy: croniter + dateutil (~15 ms), only when a cron expression is stepped
        import croniter  # noqa: F401
    finally:
        platform.architecture = real


@lru_cache(maxsize=512)
def _croniter_for(spec: str, day_or: bool, thread: int) -> Any:
    _load_croniter()
    from croniter import croniter  # lazy: croniter (~15 ms), see _load_croniter

    return croniter(spec, datetime(2000, 1, 1), day_or=day_or)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """Five-field cron (or a macro) under the DST policy in the module docstring."""

    expression: str
    zone: tzinfo
    fixed_time: bool
    spec: str  # canonical five fields for croniter: '*' or sorted number lists
    day_or: bool  # day-of-month OR day-of-week (both restricted), else AND

    def next_after(self, t: datetime) -> datetime | None:
        t = as_utc(t)
        if t >= LATEST:
            return None  # past the instants mdcron handles (clock.py): no date maths overflows
        return _within(self._next_after(t))

    def _next_after(self, t: datetime) -> datetime | None:
        local = t.astimezone(self.zone)
        wall = local.replace(tzinfo=None)
        # First passes (and gap fires) rise with the wall time, so walls <= wall(t) are done.
        best = self._scan(wall, t, True, lambda w: first_pass(w, self.zone, self.fixed_time))
        if self.fixed_time:
            return best
        # Second passes matter only in or just before a repeated hour.
        quiet = local.utcoffset() == (t + _MARGIN).astimezone(self.zone).utcoffset()
        if local.fold or not quiet:
            start = wall if quiet else wall - _MARGIN
            second = self._scan(start, t, True, lambda w: last_pass(w, self.zone))
            if second is not None and (best is None or second < best):
                best = second
        return best

    def latest_at_or_before(self, t: datetime) -> datetime | None:
        t = min(as_utc(t), _LAST)
        local = t.astimezone(self.zone)
        wall = local.replace(tzinfo=None)
        # In a second pass, walls above wall(t) up to the fold's top already had their first pass.
        start = wall + _MARGIN if local.fold else wall
        best = self._scan(start, t, False, lambda w: first_pass(w, self.zone, self.fixed_time))
        if not self.fixed_time:
            second = self._scan(wall, t, False, lambda w: last_pass(w, self.zone))
            if second is not None and (best is None or second > best):
                best = second
        return best

    def _scan(self, start: datetime, t: datetime, up: bool,
              instant: Callable[[datetime], datetime | None]) -> datetime | None:
        """Walk matching wall times from `start` (up: those > start; down: those <= start) and
        return the first instant(w) beyond t (up: > t; down: <= t). `instant` must be
        monotone in w, which first and last passes are."""
        it: Any = steps(self.spec)  # the same minutes every day: no croniter (wall_steps.py)
        errors: tuple[type[Exception], ...] = (OverflowError,)
        if it is None:
            _load_croniter()
            from croniter import CroniterBadDateError  # lazy: croniter (~15 ms), _load_croniter

            it, errors = _croniter(self.spec, self.day_or), (CroniterBadDateError, OverflowError)
        # matching walls are whole minutes, so dropping the microseconds changes nothing but
        # croniter's float rounding (far years: 23:59:59.999999 read as the next midnight)
        it.set_current(start.replace(microsecond=0) if up
                       else start.replace(second=0, microsecond=0) + _MINUTE)
        step = it.get_next if up else it.get_prev
        for _ in range(_SCAN_LIMIT):
            try:
                w = step(datetime)
            except errors:
                return None
            u = instant(w)
            if u is not None and (u > t if up else u <= t):
                return u
        raise RuntimeError(f"schedule scan for {self.expression!r} did not converge")


@dataclass(frozen=True, slots=True)
class IntervalSchedule:
    """`@every <duration>`: fires at every whole multiple of `every` since the Unix epoch (UTC).
    Elapsed time, so DST and the zone play no part; no state, so restarts do not shift it."""

    expression: str
    zone: tzinfo
    every: timedelta
    fixed_time: bool = False

    def next_after(self, t: datetime) -> datetime | None:
        t = as_utc(t)
        if t >= LATEST:
            return None
        return _within(_EPOCH + ((t - _EPOCH) // self.every + 1) * self.every)

    def latest_at_or_before(self, t: datetime) -> datetime | None:
        return _EPOCH + ((min(as_utc(t), _LAST) - _EPOCH) // self.every) * self.every


@dataclass(frozen=True, slots=True)
class OneShotSchedule:
    """`@at <ISO date-time>`: a single fire at `at` (UTC)."""

    expression: str
    zone: tzinfo
    at: datetime
    fixed_time: bool = True

    def next_after(self, t: datetime) -> datetime | None:
        return self.at if self.at > as_utc(t) else None

    def latest_at_or_before(self, t: datetime) -> datetime | None:
        return self.at if self.at <= as_utc(t) else None


_SCHEDULES: dict[tuple[str, str | None], Schedule] = {}


def schedule_of(task: Task, config: Config) -> Schedule:
    """The task's schedule in its zone (its own, else the config's). Cached per process:
    parsing a cron expression is the costly part."""
    zone_name = task.timezone or config.timezone
    key = (task.schedule, zone_name)
    found = _SCHEDULES.get(key)
    if found is None:
        found = _SCHEDULES[key] = parse_schedule(task.schedule, resolve_zone(zone_name))
    return found


def next_fire(task: Task, config: Config, now: float,
              due: tuple[float, float | None] | None = None) -> datetime | None:
    """The task's first fire after now (None for a disabled task or a chain). `due`: the
    cache's (floor, next_due), the first fire after floor: when floor <= now < next_due it is
    also the first fire after now."""
    if not task.enabled or task.after:  # a chain has no fire times of its own
        return None
    if due is not None:
        floor, first = due
        if floor <= now and (first is None or now + 1e-6 < first):
            return datetime.fromtimestamp(first, UTC) if first is not None else None
    return schedule_of(task, config).next_after(datetime.fromtimestamp(now, UTC))


def parse_schedule(expression: str, zone: tzinfo) -> Schedule:
    """A Schedule for a cron line, macro, `@every <duration>` or `@at <date-time>`."""
    text = expression.strip()
    if not text:
        raise ScheduleError(f"empty schedule; expected {_FORMS}")
    word, rest = [*text.split(maxsplit=1), ""][:2]
    word = word.lower()
    if word == "@reboot":
        raise ScheduleError("@reboot is not supported: mdcron runs from a tick every minute and "
                            "cannot tell when the machine started; use a cron time or @at")
    if word == "@every":
        return IntervalSchedule(text, zone, _parse_interval(text, rest))
    if word == "@at":
        return OneShotSchedule(text, zone, _parse_at(text, rest, zone))
    if word in _MACROS and not rest:
        return _parse_cron(text, _MACROS[word], zone)
    if word.startswith("@"):
        known = ", ".join([*_MACROS, "@every", "@at"])
        raise ScheduleError(f"unknown schedule {text!r}; known forms: {known}")
    return _parse_cron(text, text, zone)


def _parse_interval(text: str, rest: str) -> timedelta:
    try:
        seconds = parse_duration(rest)
    except DurationError as e:
        raise ScheduleError(f"bad schedule {text!r}: {e}") from None
    if not 60 <= seconds <= MAX_INTERVAL.total_seconds():
        raise ScheduleError(f"bad schedule {text!r}: the interval must be at least 1m and at "
                            "most 366d, e.g. @every 15m or @every 7d")
    if seconds != int(seconds):
        raise ScheduleError(f"bad schedule {text!r}: the interval must be a whole number of "
                            "seconds")
    return timedelta(seconds=int(seconds))


def _parse_at(text: str, rest: str, zone: tzinfo) -> datetime:
    try:
        at = datetime.fromisoformat(rest)
    except ValueError:
        at = None
    if at is None or not re.search(r"\d[T ]\d", rest):
        raise ScheduleError(f"bad schedule {text!r}: expected an ISO date-time like "
                            "'@at 2026-12-01T09:00' (optionally with an offset like +02:00)")
    if not EARLIEST.year <= at.year < LATEST.year:  # before zone arithmetic (it may overflow)
        raise ScheduleError(f"bad schedule {text!r}: the date must be {RANGE_TEXT}")
    if at.tzinfo is not None:
        instant = at.astimezone(UTC)
    else:
        instant = first_pass(at, zone, fixed=True)  # wall time, placed like a fixed-time fire
    assert instant is not None
    try:
        return check_instant(instant)
    except InstantError:
        raise ScheduleError(f"bad schedule {text!r}: the date must be {RANGE_TEXT}") from None


def _within(fire: datetime | None) -> datetime | None:
    """A fire past LATEST is no fire: nothing is scheduled beyond the instants mdcron handles."""
    return fire if fire is not None and fire < LATEST else None


def _bad(text: str, problem: str) -> ScheduleError:
    return ScheduleError(f"bad cron expression {text!r}: {problem}")


def _parse_cron(text: str, cron: str, zone: tzinfo) -> CronSchedule:
    fields = cron.split()
    if len(fields) != 5:
        extra = "; seconds and years are not supported" if len(fields) in (6, 7) else ""
        raise _bad(text, f"expected five fields (minute hour day-of-month month day-of-week), "
                         f"got {len(fields)}{extra}")
    values = [_parse_field(text, field, index) for index, field in enumerate(fields)]
    values[4] = frozenset(0 if v == 7 else v for v in values[4])  # 7 is Sunday too
    canon = [_canon(v, i) for i, v in enumerate(values)]
    day_stars = fields[2].startswith("*") or fields[4].startswith("*")
    if not day_stars and "*" in (canon[2], canon[4]):
        canon[2] = canon[4] = "*"  # OR with an unrestricted side: every day
    spec = " ".join(canon)
    fixed = not (fields[0].startswith("*") or fields[1].startswith("*"))
    if steps(spec) is not None:  # fires every day: nothing for croniter to refuse
        return CronSchedule(text, zone, fixed, spec, not day_stars)
    _load_croniter()
    from croniter import CroniterBadDateError, CroniterError  # lazy: as in _croniter_for

    try:
        it = _croniter(spec, not day_stars)
        it.set_current(datetime(2000, 1, 1))
        it.get_next(datetime)
    except CroniterBadDateError:
        raise _bad(text, "it never fires (no such date in any year)") from None
    except CroniterError as e:
        raise _bad(text, str(e)) from None
    return CronSchedule(text, zone, fixed, spec, not day_stars)


def _parse_field(text: str, field: str, index: int) -> frozenset[int]:
    name, lo, hi, names, _ = _FIELDS[index]
    values: set[int] = set()
    for item in field.split(","):
        # issue 27: `*`, `*/n` and a number read without _ITEM (its compile: ~0.3 ms a tick)
        if item == "*" or item.startswith("*/"):
            step_text = "1" if item == "*" else item[2:]
            if step_text.isascii() and step_text.isdigit():
                if int(step_text) < 1:
                    raise _bad(text, f"{name} step must be at least 1")
                values.update(range(lo, hi + 1, int(step_text)))
                continue
        elif item.isascii() and item.isdigit():
            values.add(_value(text, item, index))
            continue
        m = re.fullmatch(_ITEM, item)
        if not m or (m[1] == "*" and m[2]):
            raise _bad(text, f"cannot read {name} {item!r}; use numbers"
                             f"{' or names' if names else ''}, ranges (1-5), steps (*/15) "
                             f"and lists (1,15)")
        start = lo if m[1] == "*" else _value(text, m[1], index)
        end = _value(text, m[2], index) if m[2] else hi if m[1] == "*" or m[3] else start
        step = int(m[3]) if m[3] else 1
        if step < 1:
            raise _bad(text, f"{name} step must be at least 1")
        if start > end:
            raise _bad(text, f"{name} range {m[1]}-{m[2]} runs backwards; put the smaller first")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _value(text: str, token: str, index: int) -> int:
    name, lo, hi, names, allowed = _FIELDS[index]
    hint = f"{name} must be {allowed}"
    if token.isdigit():
        if not lo <= int(token) <= hi:
            raise _bad(text, hint)
        return int(token)
    if token.lower() in names:
        return names[token.lower()]
    if names:
        raise _bad(text, f"unknown {name} name {token!r}; use {', '.join(names)}")
    raise _bad(text, f"{name} {token!r} is not a number; {hint}")


def _canon(values: frozenset[int], index: int) -> str:
    _, lo, hi, _, _ = _FIELDS[index]
    full = set(range(lo, 7 if index == 4 else hi + 1))
    return "*" if values == full else ",".join(map(str, sorted(values)))


def fires_between(schedule: Schedule, after: datetime, until: datetime,
                  limit: int = 20) -> list[datetime]:
    """Fires in (after, until], earliest first, at most `limit`."""
    fires: list[datetime] = []
    until = as_utc(until)
    fire = schedule.next_after(after)
    while fire is not None and fire <= until and len(fires) < limit:
        fires.append(fire)
        fire = schedule.next_after(fire)
    return fires
