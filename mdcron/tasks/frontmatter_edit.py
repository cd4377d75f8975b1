"""Byte-preserving edits of hand-written task files.

People write task files; the scheduler sometimes has to change a key or two (`enabled`,
`disabled_reason`). `set_keys` touches only the lines of those keys and keeps every other byte:
comments, blank lines, key order, quoting, line endings and the body. `edit_task_file` checks
that the result still parses to what was intended and replaces the file atomically, and only if
nobody saved it meanwhile (core/atomic_write.py).

The layout rules (shared with taskfile.py, which reads the same files):
- the first line is `---` (an optional UTF-8 byte-order mark before it, trailing blanks allowed);
- the frontmatter ends at the next line that is exactly `---` (trailing blanks allowed);
- a top-level key is a line that starts in column 0 with `key:` (the key may be quoted); the
  lines after it up to the next top-level key belong to its value, except trailing blank lines
  and column-0 comments, which stay where they are.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

from ..core import safe_fs
from ..core.records import dataclass

DELIMITER = "---"
_KEY_LINE = re.compile(
    r"""(?P<key>"(?:[^"\\\r\n]|\\.)*"|'(?:[^'\r\n]|'')*'|[^\s#'"\[\]{}&*!|>%@`,?:-][^:#\r\n]*?)"""
    r"""(?P<colon>[ \t]*:)(?=[ \t]|\r?\n|$)"""
)
_NEW_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class EditError(ValueError):
    """The edit cannot be made safely; the file is left as it was."""


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split on "\\n" only (a "\\r\\n" ending stays on its line)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _is_delimiter(line: str) -> bool:
    return line.rstrip(" \t\r\n") == DELIMITER


def find_frontmatter(lines: list[str]) -> tuple[int, int]:
    """Indexes of the opening and closing `---` lines. EditError says what is missing."""
    if not lines or not _is_delimiter(lines[0].lstrip("\ufeff")):
        first = next((i for i, line in enumerate(lines) if line.strip()), None)
        if first is not None and first > 0 and _is_delimiter(lines[first]):
            raise EditError(
                f"the frontmatter must start on line 1; remove the {first} blank line(s) "
                "before the opening '---'"
            )
        raise EditError(
            "no frontmatter: a task file starts with a line '---', then key: value lines "
            "(id, schedule, ...), then a closing '---'"
        )
    for index in range(1, len(lines)):
        if _is_delimiter(lines[index]):
            return 0, index
    raise EditError(
        "the frontmatter opened by '---' on line 1 is never closed; add a line '---' after "
        "the last key"
    )


@dataclass(frozen=True, slots=True)
class KeyLine:
    """One top-level key of the frontmatter and the lines its value spans."""

    key: str  # unquoted
    start: int  # index of the key's line
    end: int  # index after its last continuation line
    head: str  # the key as written plus the colon, e.g. `enabled:` or `"enabled" :`


def _unquote(key: str) -> str:
    if len(key) >= 2 and key[0] == key[-1] == '"':
        return key[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    if len(key) >= 2 and key[0] == key[-1] == "'":
        return key[1:-1].replace("''", "'")
    return key


def key_lines(lines: list[str], start: int, stop: int) -> list[KeyLine]:
    """The top-level keys between lines[start] and lines[stop] (exclusive), in file order."""
    heads: list[tuple[int, str, str]] = []
    for index in range(start, stop):
        match = _KEY_LINE.match(lines[index])
        if match:
            heads.append((index, _unquote(match["key"]), match["key"] + match["colon"]))
    result = []
    for n, (index, key, head) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else stop
        while end - 1 > index and (
            not lines[end - 1].strip() or lines[end - 1].startswith("#")
        ):
            end -= 1  # trailing blank lines and column-0 comments are not the value's
        result.append(KeyLine(key, index, end, head))
    return result


def _comment_start(rest: str) -> int:
    """Index of a `#` comment in the text after a key's colon, or len(rest); quote-aware."""
    quote = ""
    i = 0
    while i < len(rest):
        ch = rest[i]
        if quote == '"':
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = ""
        elif quote == "'":
            if ch == "'" and rest[i + 1 : i + 2] == "'":
                i += 1  # '' is an escaped quote
            elif ch == "'":
                quote = ""
        elif ch in "\"'" and (i == 0 or rest[i - 1] in " \t[{,"):
            quote = ch
        elif ch == "#" and (i == 0 or rest[i - 1] in " \t"):
            return i
        i += 1
    return len(rest)


def _ending(line: str) -> str:
    if line.endswith("\r\n"):
        return "\r\n"
    return "\n" if line.endswith("\n") else ""


def render_value(value: object) -> str:
    """A value as a one-line YAML scalar or flow collection that reads back as the same value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value:
            return ".nan"
        if value in (float("inf"), float("-inf")):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, str):
        return _render_str(value, flow=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_render_item(v) for v in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{_render_item(k)}: {_render_item(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise EditError(f"cannot write a {type(value).__name__} into a task file")


def _render_item(value: object) -> str:
    if isinstance(value, str):
        return _render_str(value, flow=True)
    if value is None:
        return "null"
    return render_value(value)


def _render_str(value: str, *, flow: bool) -> str:
    import yaml  # lazy: yaml (~10 ms) only when a value is written

    plain_ok = (
        value
        and value == value.strip()
        and value.isprintable()
        and not (flow and any(ch in value for ch in ",[]{}"))
    )
    if plain_ok:
        try:
            if yaml.safe_load(f"k: {value}\n") == {"k": value}:
                return value
        except yaml.YAMLError:
            pass
    text = yaml.safe_dump(value, default_style='"', allow_unicode=True, width=float("inf"))
    return text.rstrip("\n")


def set_keys(text: str, updates: Mapping[str, object | None]) -> str:
    """Change only the given top-level frontmatter keys of `text`; every other byte stays.

    An existing key keeps its spelling, spacing, trailing comment and line ending; only its value
    changes (a multi-line value is replaced with its continuation lines). None removes the key's
    lines. A missing key is added as `key: value` just before the closing `---`."""
    lines = split_lines(text)
    opening, closing = find_frontmatter(lines)
    keys = key_lines(lines, opening + 1, closing)
    by_name: dict[str, list[KeyLine]] = {}
    for k in keys:
        by_name.setdefault(k.key, []).append(k)
    replace: dict[int, tuple[int, list[str]]] = {}  # start -> (end, new lines)
    appended: list[str] = []
    eol = _ending(lines[closing - 1]) if closing > opening + 1 else _ending(lines[opening])
    for name, value in updates.items():
        found = by_name.get(name, [])
        if len(found) > 1:
            where = ", ".join(str(k.start + 1) for k in found)
            raise EditError(f"key {name!r} appears more than once (lines {where}); keep one")
        if not found:
            if value is None:
                continue
            if not _NEW_KEY.fullmatch(name):
                raise EditError(f"cannot add a key named {name!r}")
            appended.append(f"{name}: {render_value(value)}{eol or chr(10)}")
            continue
        k = found[0]
        if value is None:
            replace[k.start] = (k.end, [])
            continue
        line = lines[k.start]
        line_eol = _ending(line)
        rest = line[len(k.head) : len(line) - len(line_eol)]
        after = rest[: len(rest) - len(rest.lstrip(" \t"))]
        remainder = rest[len(after) :]
        cut = _comment_start(remainder)
        old_value = remainder[:cut].rstrip(" \t")
        gap = remainder[len(old_value) : cut]
        comment = remainder[cut:]
        if comment and not old_value:
            after, gap = " ", after or " "
        new = k.head + (after or " ") + render_value(value) + (gap + comment if comment else "")
        replace[k.start] = (k.end, [new + line_eol])
    out: list[str] = []
    index = 0
    while index < len(lines):
        if index == closing:
            out.extend(appended)
        if index in replace:
            end, new_lines = replace[index]
            out.extend(new_lines)
            index = end
            continue
        out.append(lines[index])
        index += 1
    return "".join(out)


def frontmatter_text(text: str) -> tuple[str, int]:
    """The YAML between the delimiters and the 1-based file line of its first line."""
    lines = split_lines(text)
    opening, closing = find_frontmatter(lines)
    return "".join(lines[opening + 1 : closing]), opening + 2


def _load_mapping(text: str) -> dict:
    from ..core.safe_yaml import YamlLimitError, load_yaml  # lazy: yaml, only for an edit

    yaml_text, _ = frontmatter_text(text)
    try:
        data = load_yaml(yaml_text)  # bounded (safe_yaml.py): a bomb is refused, not compared
    except YamlLimitError as exc:
        raise EditError(f"the frontmatter is too complex to edit safely: {exc.problem}") from exc
    except Exception as exc:  # YAMLError, and ValueError for absurd ints
        raise EditError(f"the frontmatter does not parse: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise EditError("the frontmatter is not a mapping of key: value")
    return data


SAVE_SETTLE = 0.05  # seconds a file that does not parse is given to finish being saved
READ_LIMIT = 16 << 20  # bytes: far above a task file's 1 MiB; a bigger file is not edited


def _read(path: Path, root: Path | None) -> bytes:
    """The file's bytes: a FIFO or device in its place is refused, never waited on; with
    `root`, nothing on the way is a symlink (without, the file is read where it resolves)."""
    try:
        data = safe_fs.read_regular(os.path.realpath(path) if root is None else path,
                                    READ_LIMIT, root=root)
    except safe_fs.UnsafePath as exc:
        raise EditError(f"not editing it: {exc}") from None
    if len(data) > READ_LIMIT:
        raise EditError(f"{path} is larger than {READ_LIMIT} bytes; not editing it")
    return data


def _changes(path: Path, raw: bytes, root: Path | None) -> bool:
    """Whether the file holds other bytes than `raw` now or very soon: an editor that writes in
    place truncates first, so a file read empty or cut short is usually half-way through a save."""
    if _read(path, root) != raw:
        return True
    time.sleep(SAVE_SETTLE)
    return _read(path, root) != raw


def edit_task_file(
    path: Path, updates: Mapping[str, object | None], *, root: Path | None = None
) -> str:
    """Apply `updates` to the task file at `path` and return the new text.

    The file's current content is always the base: when a person edited it since the caller read
    it, their edit wins; our keys go on top. The result must parse to the old mapping plus
    `updates`, else EditError and the file is untouched. If the file changes between our read
    and our write (up to the rename itself: see _swap_in), or is read half-saved, the edit is
    redone on the newer text. `root` (the home): see write_atomic."""
    for _attempt in range(5):
        raw = _read(path, root)
        try:
            current = raw.decode("utf-8")
            before = _load_mapping(current)
        except UnicodeDecodeError as exc:
            if _changes(path, raw, root):
                continue  # read in the middle of a save: read the saved file
            raise EditError(f"{path} is not UTF-8 text; not editing it") from exc
        except EditError:
            if _changes(path, raw, root):
                continue  # read in the middle of a save (an editor writing in place)
            raise
        new = set_keys(current, updates)
        wanted = dict(before)
        for key, value in updates.items():
            if value is None:
                wanted.pop(key, None)
            else:
                wanted[key] = list(value) if isinstance(value, tuple) else value
        try:
            after = _load_mapping(new)
        except EditError as exc:
            raise EditError(f"the edit would break {path}: {exc}") from exc
        if after != wanted:
            changed = sorted(k for k in set(after) | set(wanted) if after.get(k) != wanted.get(k))
            raise EditError(f"the edit of {path} would not read back as intended (keys {changed})")
        if new == current:
            return current
        from ..core.atomic_write import write_atomic  # lazy: off the tick, which only reads

        if write_atomic(Path(path), new, unless_changed=raw, root=root):
            return new
        # saved by someone between our read and our write: start again from their text
    raise EditError(f"{path} keeps changing while we edit it; try again")


def __getattr__(name: str) -> object:
    """`write_atomic` moved to core/atomic_write.py (every file, not only task files): older
    imports from here still work."""
    if name != "write_atomic":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ..core.atomic_write import write_atomic  # lazy: as in edit_task_file

    return write_atomic
