"""The keys of a task file, one check each: the value as written (a YAML scalar or list) to the
value a Task holds, or Bad with a message saying what would be right (taskfile.py reports it with
the file, key and line). KNOWN_KEYS: every key a task file may have.
"""

from __future__ import annotations

import datetime as dt
import re
import reprlib
from collections.abc import Callable, Sequence

from ..core.accounts import AccountError, check_group, check_user
from ..core.records import fields
from ..core.units import DurationError, parse_duration
from . import lenient, outside_keys, run_keys
from . import task as task_model
from .task import Task

MAX_SECONDS = 366 * 86400  # longer durations are surely typos (and overflow date maths)
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KNOWN_KEYS: frozenset[str] = frozenset(
    f.name for f in fields(Task) if f.name not in ("path", "body")
)
_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60
_repr.maxlevel = 2


class Bad(Exception):
    """A value that cannot be used; the message says what would be right."""


def show(value: object) -> str:
    """A value for a message: strings in double quotes, everything else short."""
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing"
    if isinstance(value, int) and abs(value) > 10**30:
        return "a huge number"
    return _repr.repr(value)


# --- value checks: each returns the converted value or raises Bad ------------------------


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, dt.date)) and not isinstance(value, bool):
        raise Bad(f'expected text; got {show(value)} — put it in quotes: "{value}"')
    raise Bad(f"expected text; got {show(value)}")


def task_id(value: object) -> str:
    text = _text(value)
    if not ID_PATTERN.fullmatch(text) or ".." in text:
        raise Bad(
            "expected 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit "
            f"and without '..' (e.g. backup-db); got {show(text)}"
        )
    return text


def _schedule(value: object) -> str:
    if isinstance(value, dt.date):
        at = value.isoformat()[:16] if isinstance(value, dt.datetime) else f"{value}T09:00"
        raise Bad(
            f"YAML read {value} as a date, not a schedule; write the schedule in quotes, "
            f'e.g. schedule: "@at {at}" or schedule: "0 9 * * *"'
        )
    text = _text(value)
    if not text.strip():
        raise Bad('expected a cron expression or macro, e.g. "*/5 * * * *" or "@daily"')
    return text


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise Bad(f"expected true or false; got {show(value)}")


def _choice(options: Sequence[str]) -> Callable[[object], str]:
    def check(value: object) -> str:
        if isinstance(value, str) and value in options:
            return value
        raise Bad(f"expected one of {', '.join(options)}; got {show(value)}"
                   + lenient.did_you_mean(value, options))

    return check


def _seconds(value: object, what: str) -> float:
    try:
        seconds = parse_duration(value)
    except (DurationError, OverflowError):
        raise Bad(f"expected {what}; got {show(value)}") from None
    if seconds > MAX_SECONDS:
        raise Bad(f"expected at most 366d; got {show(value)}")
    return seconds


def _timeout(value: object) -> float:
    seconds = _seconds(value, "seconds or a duration like 90s, 10m, 2h")
    if seconds <= 0:
        raise Bad(f"expected more than 0 seconds, e.g. 90s, 10m, 2h; got {show(value)}")
    return seconds


def _catchup(value: object) -> float:
    if value == "always":
        return task_model.CATCHUP_ALWAYS
    if value == "never":
        return task_model.CATCHUP_NEVER
    return _seconds(value, 'a duration like 90s, 10m, 2h, or "always" or "never"')


def _command(value: object) -> str:
    text = _text(value)
    if not text.strip():
        raise Bad("expected a command, e.g. command: ./backup.sh; got an empty one")
    return text


def _str_list(example: str) -> Callable[[object], tuple[str, ...]]:
    def check(value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            raise Bad(f"use a list: {example}; got the single text {show(value)}")
        if not isinstance(value, list):
            raise Bad(f"expected a list like {example}; got {show(value)}")
        bad = [item for item in value if not isinstance(item, str)]
        if bad:
            raise Bad(f"expected a list of texts like {example}; {show(bad[0])} is not text")
        return tuple(value)

    return check


def _names(value: object) -> tuple[str, ...]:
    names = _str_list("[GITHUB_TOKEN, SLACK_TOKEN]")(value)
    for name in names:
        if not ENV_NAME.fullmatch(name):
            raise Bad(f"{show(name)} is not an environment variable name (A-Z, 0-9, _)")
    return names


def _env(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise Bad(
            f"expected a mapping of NAME: value, e.g. env: {{LANG: C.UTF-8}}; got {show(value)}"
        )
    result = {}
    for name, item in value.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise Bad(f"{show(name)} is not an environment variable name (A-Z, 0-9, _)")
        if isinstance(item, bool):
            result[name] = "true" if item else "false"
        elif isinstance(item, (str, int, float)):
            result[name] = str(item)
        else:
            raise Bad(f"{name}: expected a text or number value; got {show(item)}")
    return result


def _hosts(names: tuple[str, ...]) -> tuple[str, ...]:
    from ..settings.state_url import HOST_LIKE  # lazy: state_url loads socket; only for `hosts:`

    for name in names:
        if not HOST_LIKE.fullmatch(name):
            raise Bad(f"{show(name)} is not a host name (letters, digits, '-', '_'; the"
                       " `host:` of a scheduler.yaml)")
    if not names:
        raise Bad("an empty list would run the task nowhere; leave hosts out for any host")
    return names


def _plain(check: Callable[[object], object]) -> Callable[[object], object]:
    """A check that raises ValueError (outside_keys.py, run_keys.py), as one of this module's."""
    def run(value: object) -> object:
        try:
            return check(value)
        except ValueError as exc:
            raise Bad(f"{exc}; got {show(value)}") from None

    return run


def _account(check: Callable[[object], str]) -> Callable[[object], str]:
    def run(value: object) -> str:
        try:
            return check(value)
        except AccountError as exc:
            raise Bad(str(exc)) from None

    return run


CHECKS: dict[str, Callable[[object], object]] = {
    "id": task_id,
    "title": lenient.title,
    "schedule": _schedule,
    "timezone": _text,
    "timeout": _timeout,
    "retry": _plain(run_keys.retry_count),
    "enabled": _flag,
    "disabled_reason": _choice(task_model.DISABLED_REASONS),
    "self_heal": _flag,
    "notify_on": _choice(task_model.NOTIFY_ON),
    "notify_to": _text,
    "run_as": _choice(task_model.RUN_AS),
    "command": _command,
    "cwd": _text,
    "cwd_policy": _text,
    "env": _env,
    "secrets": _names,
    "catchup": _catchup,
    "tags": lenient.tags,
    "prompt": _text,
    "model": _text,
    "heal_paths": _str_list('heal_paths: ["scripts/*.sh"]'),
    "claude_config": _text,
    "after": lambda v: tuple(task_id(x) for x in _str_list("after: [extract, fetch]")(v)),
    "chain_window": _timeout,
    "once_per": _choice(task_model.ONCE_PER),
    "uses": _str_list("uses: [gpu]"),
    "on_busy": _choice(task_model.ON_BUSY),
    "busy_wait": lambda v: _seconds(v, "a duration like 30s, 5m"),
    "hosts": lambda v: _hosts(_str_list("hosts: [web1, web2]")(v)),
    "user": _account(check_user),
    "group": _account(check_group),
    **{key: _plain(getattr(outside_keys, key)) for key in outside_keys.KEYS},  # issue 26
    "retry_delay": _plain(run_keys.retry_delay),  # issue 26: run_keys.py
    "jitter": _plain(run_keys.jitter),
    "overlap": _plain(run_keys.overlap),
}
assert set(CHECKS) == KNOWN_KEYS
NULL_OK = {f.name for f in fields(Task) if f.default is None}
