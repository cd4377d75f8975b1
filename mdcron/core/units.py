"""Durations as people write them ("90s", "10m", "2h", "1d", 300) and back again; whole numbers."""

from __future__ import annotations

import math
import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# Patterns as text: `re` compiles one on its first use and caches it, so a process that reads
# no duration (a tick from the cache) does not compile it at import (issue 27).
_DURATION = r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$"
_PART = r"\d+(?:\.\d+)?\s*[smhdw]"
_COMPOUND = rf"^\s*(?:{_PART}\s*){{2,5}}$"  # issue 25: 1h30m, 2d 12h, 5m 3s


class DurationError(ValueError):
    """A duration that cannot be read; the message says what would be right."""


def parse_duration(value: object) -> float:
    """Seconds from an int/float (seconds) or a string like "90s", "10m", "2h", "1d", "1w", or
    several of those in a row ("1h30m", "2d 12h").

    A bare number in a string counts as seconds. Negative, zero-length units, NaN and infinity
    are refused: every duration here bounds something real (a timeout, a window)."""
    if isinstance(value, bool):
        raise DurationError(f"expected a duration like 90s, 10m or 2h, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        match = re.match(_DURATION, value)
        if match:
            seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
        elif len(value) <= 100 and re.match(_COMPOUND, value):  # as format_duration writes them
            parts = re.findall(r"(\d+(?:\.\d+)?)\s*([smhdw])", value)
            seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
        else:
            raise DurationError(f"expected a duration like 90s, 10m, 2h or 1h30m, got {value!r}")
    else:
        raise DurationError(f"expected a duration like 90s, 10m or 2h, got {type(value).__name__}")
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationError(f"a duration must be a finite number of seconds >= 0, got {value!r}")
    return seconds


def duration_between(value: object, low: float, high: float) -> float:
    """parse_duration, and the result from `low` to `high` seconds; DurationError naming the
    range otherwise (a huge value would overflow date maths, or wait for ever)."""
    seconds = parse_duration(value)
    if not low <= seconds <= high:
        raise DurationError(f"expected from {_brief(low)} to {_brief(high)}, got "
                            f"{_shown(value)}")
    return seconds


def whole_number(value: object, low: int = 1, high: int | None = None) -> int:
    """`value` when it is an int >= low (and <= high; YAML's true/false are not numbers);
    ValueError saying what would be right otherwise."""
    if (isinstance(value, bool) or not isinstance(value, int) or value < low
            or (high is not None and value > high)):
        allowed = f" (allowed: {low} to {high:,})" if high is not None else ""
        raise ValueError(f"expected a whole number >= {low}, got {_shown(value)}{allowed}")
    return value


def _shown(value: object) -> str:
    """repr, except for a number too long to print (repr of a 5000-digit int raises)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > 1e15:
        return "a huge number"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _brief(seconds: float) -> str:
    """A range bound as written in the README: 0s, 1s, 90s, 10m, 1h, 7d, 366d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def format_duration(seconds: float) -> str:
    """Short human form: 0.4s, 12s, 5m 3s, 2h 10m, 3d 4h."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    total = int(round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"
