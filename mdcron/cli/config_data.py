"""scheduler.yaml read without PyYAML when it is a flat list of `key: value` lines (issue 27):
the tick then neither imports yaml nor runs its parser (~10-15 ms before its first task).

flat() parses such a text itself, and gives up (None) on anything else: a nested section, a
flow collection, a quote, an anchor, a tag, a multi-line value. Its result is used only for a
text PyYAML was seen to read the same way (values and their types): the first tick (or command)
that reads a text parses it with both and, when they agree, writes the text's tick cache key
(state/idle.py cache_key: a digest of the config's bytes, the code, the version, $HOME) to
state/config-checked; the ticks after it, and read-only commands, find the key there and use
flat(). Only the digest is kept: the config's text may hold a password the state must not.

A `timezone:` is resolved by ZoneInfo, and importing zoneinfo (sysconfig, struct) cost every
tick with work ~2.4 ms before its first task. So a checked config whose zone resolved notes in
state/zone-checked which file ZoneInfo read for that name (the first folder of its search path,
the interpreter, $PYTHONTZPATH) and that file's stat: while they are all unchanged, ZoneInfo
would read the same bytes again, and the config is built without resolving the zone again.
`timezone: UTC` needs no record: wall_time resolves it without zoneinfo or a file.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ..core import safe_fs
from ..core.problems import Problem
from ..settings.config import CONFIG_NAME, Config, load_config, parse_config
from ..state import cache_key as keys

NAME = "config-checked"
ZONE_NAME = "zone-checked"
LIMIT = 1 << 16  # a flat config is a few lines; a longer text goes to PyYAML
# compiled by `re` on first use: a line of the plain shape (simple_line) needs none of them
# (issue 27: their compiles cost a tick's first task ~0.5 ms)
_LINE = r"([A-Za-z_][A-Za-z0-9_]*):(?:[ \t]+(.*?))?[ \t]*(?:[ \t]#.*)?"
_PLAIN = r"[A-Za-z0-9_./+@=:-][A-Za-z0-9_./+@=: -]*"  # no quote, bracket, #, &, *
_KEY_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_KEY = _KEY_START | frozenset("0123456789")
_SIMPLE = _KEY | frozenset("./+@=-")  # _PLAIN's characters but space and `:`


def load(home: Path, text: str | None, keep: bool) -> tuple[Config, list[Problem]]:
    """load_config(home) for the config whose text is `text` (fastpath.config_text: '+' and the
    text, '-' none, None unreadable: load_config reads and reports those); `keep`: may write
    the key of a text both parsers read alike (every command but a dry run: issue 27).
    ConfigError as load_config."""
    body = _body(text)
    data = flat(body) if body is not None else None
    if data is None:
        return load_config(home)
    key = keys.cache_key(text)  # type: ignore[arg-type]  (a str when there is a body)
    checked = home / "state" / NAME
    if _read(checked, home) == key:
        zone = data.get("timezone")
        if zone is None:
            return load_config(home, data=data)
        if zone == "UTC" or _zone_holds(home, str(zone)):  # UTC: no file (core/wall_time.py)
            return load_config(home, data=data, zone_checked=True)
        built = load_config(home, data=data)  # the zone resolved (else ConfigError)
        if keep:
            _note_zone(home, str(zone))
        return built
    parsed = parse_config(home / CONFIG_NAME, body)
    if keep and same(parsed, data):
        _write(checked, home, key)
    return load_config(home, data=parsed)


def _body(text: str | None) -> str | None:
    """The file's text in config_text's answer ('+' and the text), if it is valid UTF-8 and
    short enough to be a flat config; else None."""
    if text is None or not text.startswith("+") or len(text) > LIMIT:
        return None
    try:
        text.encode("utf-8")  # surrogates stand for bytes that are not UTF-8
    except UnicodeEncodeError:
        return None
    return text[1:]


def flat(text: str) -> dict | None:
    """A text of `key: scalar` lines (and blank or comment lines) as a mapping, else None."""
    data: dict[str, object] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        found = simple_line(line)
        if found is not None:
            key, value = found  # a plain value: _PLAIN's characters, no ": "
        else:
            match = re.fullmatch(_LINE, line)
            if match is None:
                return None
            key, value = match.group(1), match.group(2)
            if value is not None and (not re.fullmatch(_PLAIN, value) or ": " in value):
                return None
        if key in data:
            return None
        # `key:` alone: null, unless a section follows (then its indented line gives up)
        data[key] = None if value is None else _scalar(value)
    return data


def simple_line(line: str) -> tuple[str, str | None] | None:
    """(key, value) of a line `key: value` (one space, the value of _SIMPLE's characters) or
    `key:`, which _LINE reads so and _PLAIN accepts; None for any other line (_LINE decides)."""
    key, colon, rest = line.partition(":")
    if not colon or not key or key[0] not in _KEY_START or not _KEY.issuperset(key):
        return None
    if not rest:
        return key, None
    value = rest[1:]
    if rest[0] != " " or not value or not _SIMPLE.issuperset(value):
        return None
    return key, value


def _scalar(value: str) -> object:
    lower = value.lower()
    if lower in ("true", "false"):
        return lower == "true"
    if lower in ("null", "~"):
        return None
    digits = value[1:] if value[:1] in ("-", "+") else value  # _PLAIN's: ASCII only
    if digits.isdigit() and (digits == "0" or digits[0] != "0"):  # [-+]?(?:0|[1-9][0-9]*)
        return int(value)
    whole, dot, part = digits.partition(".")
    if dot and whole.isdigit() and part.isdigit():  # [-+]?[0-9]+\.[0-9]+
        return float(value)
    return value


def same(a: object, b: object) -> bool:
    """Equal with the same types all the way down (True is not 1 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)  # type: ignore[union-attr,index]
    return a == b


def _zone_holds(home: Path, name: str) -> bool:
    """state/zone-checked says ZoneInfo found `name` as a file that is unchanged since."""
    text = _read(home / "state" / ZONE_NAME, home, 1024)
    fields = text.split("\t") if text is not None else []
    return len(fields) == 6 and text == _zone_record(name, fields[4])


def _zone_record(name: str, path: str) -> str | None:
    """The zone, what decides where ZoneInfo looks (the interpreter and its build, whose
    sysconfig names the search path, and $PYTHONTZPATH), the file and its stat."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return "\t".join((name, sys.executable, sys.version, os.environ.get("PYTHONTZPATH", "-"),
                      path, f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"))


def _note_zone(home: Path, name: str) -> None:
    """After `name` resolved: its record, when ZoneInfo found it in the first folder of its
    search path (found elsewhere, or in the tzdata package: resolved by every tick)."""
    zoneinfo = sys.modules.get("zoneinfo")  # imported by the resolution just made
    if zoneinfo is None or not zoneinfo.TZPATH:
        return
    path = os.path.join(zoneinfo.TZPATH[0], name)
    record = _zone_record(name, path) if os.path.isfile(path) else None
    if record is not None and record.isascii() and "\n" not in record:
        _write(home / "state" / ZONE_NAME, home, record)


def _read(path: Path, home: Path, limit: int = 256) -> str | None:
    try:  # inside state/ walked from the home, never through a symlink or a FIFO
        return safe_fs.read_regular(path, limit, root=home).decode("ascii").strip()
    except (OSError, ValueError):
        return None


def _write(path: Path, home: Path, key: str) -> None:
    """Owner-only, as state/; nothing when there is no state folder yet or it cannot be."""
    if not path.parent.is_dir():
        return
    try:
        safe_fs.replace_file(path, (key + "\n").encode("ascii"), root=home)
    except OSError:
        pass
