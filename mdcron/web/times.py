"""Times on the pages (issue 24): each instant is a <time datetime="ISO"> that static/times.js
shows in the browser's zone ("in 4 min", "3 min ago", the absolute time and zone on hover).
Without script the server's own local time shows, its zone named. The markup does not depend
on the clock, so a page that did not change answers 304 to the poller (app.Web.page).

A pause's end typed in the page is read in the zone the person chose (a select the script sets
to the browser's zone), not in the server's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from markupsafe import Markup, escape

from ..core.limits import RANGE_TEXT, check_instant


def _instant(value: str | float | None) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, UTC)
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def when(value: str | float | None, rel: bool = True) -> Markup | str:
    """`<time>` for an ISO instant or epoch seconds; "—" for none. rel: shown relative."""
    dt = _instant(value)
    if dt is None:
        return "—" if value in (None, "") else str(value)
    local = dt.astimezone()
    shown = local.strftime("%Y-%m-%d %H:%M ") + (local.tzname() or "")
    return Markup('<time datetime="{}"{}>{}</time>').format(
        dt.isoformat(), Markup(" data-rel") if rel else "", escape(shown.strip()))


def until_instant(text: str, zone: str | None) -> float:
    """A typed pause end (datetime-local, or ISO with an offset) as epoch seconds. A time
    without an offset is read in `zone` (the person's choice), else in the server's zone.
    ValueError with the fix for a bad time or an unknown zone."""
    try:
        dt = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"until must be a date and time (ISO-8601) {RANGE_TEXT}") from exc
    if dt.tzinfo is None:
        if zone:
            try:
                dt = dt.replace(tzinfo=ZoneInfo(zone))
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"zone {zone[:60]!r} is not a time zone: choose one from the"
                                 " list (e.g. Europe/Berlin or UTC)") from exc
        else:
            dt = dt.astimezone()
    try:
        return check_instant(dt.astimezone(UTC)).timestamp()
    except (ValueError, OverflowError) as exc:  # InstantError is a ValueError
        raise ValueError(f"until must be a date and time (ISO-8601) {RANGE_TEXT}") from exc
