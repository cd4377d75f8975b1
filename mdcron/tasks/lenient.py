"""Task-file values read the way they were obviously meant, and hints for the usual mistakes
(issue 25). A cosmetic key (`title`, `tags`) never disables a task: its value is read the
obvious way, or left out, with a warning (`Accepted`). A misspelt choice gets a did-you-mean,
a `command:` YAML cannot read gets its quoted form."""

from __future__ import annotations

import datetime as dt
import reprlib
from collections.abc import Sequence

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60
_repr.maxlevel = 2
_TAGS_EXAMPLE = "tags: [backup, nightly]"


class Accepted(Exception):
    """A cosmetic value read the obvious way: the task runs, with this warning."""

    def __init__(self, value: object, message: str):
        super().__init__(message)
        self.value = value


def title(value: object) -> str:
    """Text as it is; a number or date as its text; anything else: the id is shown."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, dt.date)) and not isinstance(value, bool):
        raise Accepted(str(value), f'expected text; got {value} — put it in quotes: "{value}"'
                                   f' (read as "{value}")')
    raise Accepted("", f"expected text; got {_repr.repr(value)}; the id is shown instead")


def tags(value: object) -> tuple[str, ...]:
    """A list of texts; `tags: backup` or `tags: a, b` as the list it obviously means;
    numbers as their text; anything else ignored."""
    if isinstance(value, str):
        found = tuple(t.strip() for t in value.split(",") if t.strip())
        listed = ", ".join(found)
        raise Accepted(found, f"a single text, read as [{listed}]; write tags: [{listed}]")
    if isinstance(value, list) and all(isinstance(t, (str, int, float)) for t in value):
        found = tuple(str(t) for t in value)
        if any(not isinstance(t, str) for t in value):
            raise Accepted(found, "numbers read as text; write them in quotes, e.g. "
                                  + _TAGS_EXAMPLE)
        return found
    raise Accepted((), f"expected a list like {_TAGS_EXAMPLE}; got {_repr.repr(value)},"
                       " ignored")


def did_you_mean(value: object, options: Sequence[str]) -> str:
    """' — did you mean failure?' for a value close to one of `options`, else ''."""
    if not isinstance(value, str):
        return ""
    import difflib  # lazy: only for a misspelt value

    near = difflib.get_close_matches(value.strip().lower(), options, n=1, cutoff=0.6)
    return f" — did you mean {near[0]}?" if near else ""


def quote_command(line: str, why: bool = True) -> str:
    """'; … put the command in quotes: command: '…'' from the `command:` line as written."""
    written = line.partition(":")[2].strip()
    if not written:
        return "; put the command in quotes"
    quoted = "'" + written.replace("'", "''") + "'"
    because = "YAML gives ': ' and ' #' a meaning of their own, so " if why else ""
    return f"; {because}put the command in quotes: command: {quoted}"
