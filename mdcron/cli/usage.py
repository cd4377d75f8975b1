"""What the commands share with the entry point: exit statuses, the usage error, the clock.

A module of its own so that commands.py and actions.py need not import cli/main.py, which imports
them. Standard library and clock.py only (every command loads clock.py anyway, through commands.py).
"""

from __future__ import annotations

from ..core.clock import Clock, InstantError, parse_instant

OK, PROBLEM, USAGE = 0, 1, 2


class UsageError(Exception):
    """A command-line value that cannot be used; the message says which and why."""


def clock_from(value: str | None, option: str = "") -> Clock:
    """The real clock, read once here, unless an instant is given (`option`: --now, --at...)."""
    if not value:
        return Clock.real()
    try:
        return Clock(parse_instant(value))
    except InstantError as exc:
        raise UsageError(f"{option}: {exc}" if option else str(exc)) from None
    except ValueError as exc:
        raise UsageError(f"not an ISO-8601 instant: {value!r} ({exc})") from exc
