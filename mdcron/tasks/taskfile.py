"""Task files (tasks/*.md) → Task objects, with every problem reported.

A task file is YAML frontmatter between `---` lines, then a Markdown body (see
frontmatter_edit.py for the exact layout rules). Reading never raises for bad content: each
problem comes back as a Problem that says where it is, what is wrong and what would be right.
Any error means no Task for that file; warnings (unknown keys, a missing cwd folder) do not.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from ..core import safe_fs
from ..core.problems import Problem, unknown_key
from ..settings.config import Config
from . import lenient
from .cross_checks import (
    check_issue12_keys,
    check_issue26_keys,
    check_kind,
    check_paths,
    check_schedule,
)
from .frontmatter_edit import EditError, find_frontmatter, key_lines, split_lines
from .key_checks import CHECKS, KNOWN_KEYS, NULL_OK, Bad, show
from .not_tasks import NOT_A_TASK, not_a_task
from .task import Task
from .task import find_duplicate_ids as find_duplicate_ids  # re-exported: older imports

MAX_BYTES = 1024 * 1024
_ERROR_PREFIX = "internal error while reading this file"


# --- reading --------------------------------------------------------------------------------


_LONG_WORD = re.compile(r"\S{120,}")


def _clip(message: str) -> str:
    """Messages quote values (a schedule, a path); a huge value must not make a huge message
    in the cron log: any run of 120+ characters without a space keeps its start and length."""
    return _LONG_WORD.sub(lambda m: f"{m[0][:60]}…({len(m[0])} characters)", message)


class _Report:
    """Problems of one file, with the line of each top-level key."""

    def __init__(self, path: Path):
        self.path = path
        self.problems: list[Problem] = []
        self.lines: dict[str, int] = {}  # key -> 1-based line (the last one, as YAML reads it)
        self.close_line: int | None = None
        self.raw: dict[str, str] = {}  # key -> its line as written (issue 25: quoting hints)

    def error(self, message: str, key: str | None = None, line: int | None = None) -> None:
        line = line if line is not None else self.lines.get(key or "")
        self.problems.append(Problem(self.path, _clip(message), key=key, line=line))

    def warn(self, message: str, key: str | None = None) -> None:
        line = self.lines.get(key or "")
        self.problems.append(Problem(self.path, _clip(message), key=key, line=line,
                                     severity="warning"))

    @property
    def failed(self) -> bool:
        return any(p.severity == "error" for p in self.problems)


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def parse_task_text(text: str, path: Path, config: Config) -> tuple[Task | None, list[Problem]]:
    """The Task in `text` (the content of the file at `path`) and every problem found."""
    report = _Report(_absolute(path))
    try:
        task = _parse(text, report, config)
    except Exception as exc:  # a bug of ours must not stop the other files or the tick
        report.error(f"{_ERROR_PREFIX} ({type(exc).__name__}: {exc}); please report it")
        task = None
    return (None if report.failed else task), report.problems


SETTLE_TRIES = 3  # reads of a file that is being written before its error is reported
SETTLE_PAUSE = 0.05  # seconds between them


def load_task_file(path: Path, config: Config) -> tuple[Task | None, list[Problem]]:
    """Read and parse one task file; unreadable, binary, non-UTF-8 or huge files are problems.

    An editor that saves in place (truncate, then write) can be caught half-way: when a read
    gives an error and the file was empty or changed while it was read, it is read again (a
    few times, 50 ms apart) before the error counts."""
    path = _absolute(path)
    for _ in range(SETTLE_TRIES - 1):
        before = _stat_key(path)
        task, problems = _load_once(path, config)
        if task is not None or (before is not None and before[0] > 0
                                and before == _stat_key(path)):
            return task, problems
        time.sleep(SETTLE_PAUSE)
    return _load_once(path, config)


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns, info.st_ino


def _load_once(path: Path, config: Config) -> tuple[Task | None, list[Problem]]:
    report = _Report(path)
    try:  # O_NONBLOCK|O_NOFOLLOW, then fstat: a FIFO swapped in after the scan cannot hang us
        fd = safe_fs.open_at(None, str(path), os.O_RDONLY)
    except safe_fs.NotRegular as exc:
        report.error(_not_regular(exc.kind))
        return None, report.problems
    except OSError as exc:
        report.error(f"cannot read the file: {exc.strerror or exc}")
        return None, report.problems
    try:
        size = os.fstat(fd).st_size
        if size > MAX_BYTES:
            report.error(_too_large(size))
            return None, report.problems
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        report.error(f"cannot read the file: {exc.strerror or exc}")
        return None, report.problems
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        report.error(_too_large(len(data)))
        return None, report.problems
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        report.error(_nul_message(), line=line)
        return None, report.problems
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        report.error(_not_utf8(f"byte {exc.start}"), line=line)
        return None, report.problems
    return parse_task_text(text, path, config)


def _not_regular(kind: str) -> str:
    if kind == "a symlink":
        return ("not a regular file (a symlink: mdcron cannot read task files through links, "
                "which could be swapped for a FIFO or lead anywhere); fix: put the file itself "
                "in tasks/")
    return f"not a regular file ({kind}); fix: replace it with a task file"


def _too_large(size: int) -> str:
    return (
        f"too large ({size} bytes; a task file may be at most 1 MiB): keep data and long "
        "scripts in separate files and refer to them"
    )


def _nul_message() -> str:
    return "contains NUL bytes, so it is not a text file; a task file is UTF-8 Markdown"


def _not_utf8(where: str) -> str:
    return f"not UTF-8 text (bad {where}); save the file as UTF-8"


def _parse(text: str, report: _Report, config: Config) -> Task | None:
    if len(text) > MAX_BYTES:
        report.error(_too_large(len(text)))
        return None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        report.error(_not_utf8(f"character {exc.start}"), line=text.count("\n", 0, exc.start) + 1)
        return None
    if size > MAX_BYTES:
        report.error(_too_large(size))
        return None
    if "\x00" in text:
        report.error(_nul_message(), line=text.count("\n", 0, text.index("\x00")) + 1)
        return None
    data, body = _read_frontmatter(text, report)
    if data is None:
        return None
    return _build(data, body, report, config)


def _read_frontmatter(text: str, report: _Report) -> tuple[dict | None, str]:
    lines = split_lines(text)
    try:
        opening, close = find_frontmatter(lines)
    except EditError as exc:
        if not_a_task(lines):  # issue 25: a README.md among the tasks is not a broken task
            report.warn(NOT_A_TASK)
        else:
            report.error(str(exc), line=1)
        return None, ""
    report.close_line = close + 1
    first_line = opening + 2  # 1-based line of the first frontmatter line
    yaml_text = "".join(lines[opening + 1 : close])
    body = "".join(lines[close + 1 :]).strip()
    counts: dict[str, list[int]] = {}
    for k in key_lines(lines, opening + 1, close):
        counts.setdefault(k.key, []).append(k.start + 1)
    report.lines = {key: found[-1] for key, found in counts.items()}
    report.raw = {key: lines[found[-1] - 1] for key, found in counts.items()}
    data = _load_yaml(yaml_text, first_line, report)
    if data is None:
        return None, body
    for key, found in counts.items():
        if len(found) > 1 and key in data:
            where = " and ".join(str(n) for n in found)
            report.error(
                f"{key}: appears on lines {where}; YAML would silently use the last one — "
                "keep one",
                key=key,
            )
    return data, body


def _load_yaml(yaml_text: str, first_line: int, report: _Report) -> dict | None:
    # lazy: yaml (~10 ms), only for a file the cache has not seen (cache.py)
    import yaml

    from ..core.safe_yaml import YamlLimitError, load_yaml  # lazy: as yaml

    try:
        data = load_yaml(yaml_text)  # bounded: depth, aliases, size (safe_yaml.py)
    except YamlLimitError as exc:
        line = first_line + exc.problem_mark.line if exc.problem_mark is not None else None
        report.error(f"the frontmatter is refused unread: {exc.problem}; flatten it or "
                     "drop the aliases (&name, *name)", key=_key_at(report, line), line=line)
        return None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = None
        if mark is not None:
            line = first_line + mark.line
        elif getattr(exc, "position", None) is not None:  # ReaderError: a bad character
            line = first_line + yaml_text.count("\n", 0, exc.position)  # type: ignore[attr-defined]
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        hint = _yaml_hint(yaml_text, line - first_line if line is not None else None)
        key = next((k for k, n in report.lines.items() if n == line), None)
        if key == "command" and not hint:  # issue 25: `: ` or `#` in a shell line
            hint = lenient.quote_command(report.raw.get("command", ""))
        report.error(f"the frontmatter is not valid YAML: {problem}{hint}", key=key, line=line)
        return None
    except (ValueError, OverflowError, RecursionError, MemoryError) as exc:
        if "integer string conversion" in str(exc):
            report.error("the frontmatter holds a number thousands of digits long; shorten it")
        else:
            report.error(f"the frontmatter cannot be read: {type(exc).__name__}: {exc}")
        return None
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single value ({show(data)})"
        report.error(
            f"the frontmatter is {kind}, not a mapping; write one key: value per line, "
            "e.g. id: backup-db",
            line=first_line,
        )
        return None
    return data


def _key_at(report: _Report, line: int | None) -> str | None:
    """The top-level key whose value holds `line`."""
    starts = [(n, key) for key, n in report.lines.items() if line is not None and n <= line]
    return max(starts)[1] if starts else None


def _yaml_hint(yaml_text: str, index: int | None) -> str:
    if index is None:
        return ""
    lines = yaml_text.split("\n")
    if not 0 <= index < len(lines):
        return ""
    line = lines[index].rstrip("\r")
    if "\t" in line[: len(line) - len(line.lstrip())]:
        return "; indent with spaces, not tabs"
    match = re.match(r"([^\s#:][^:#]*?)\s*:\s+([@`*%].*?)(\s+#.*)?$", line)
    if match:
        value = match[2].replace("\\", "\\\\").replace('"', '\\"')
        return (
            f"; a value starting with {match[2][0]!r} must be quoted: "
            f'{match[1]}: "{value}"'
        )
    return ""


def _build(data: dict, body: str, report: _Report, config: Config) -> Task | None:
    values: dict[str, object] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            report.warn(
                f"key {show(key)} is not a name (YAML read it as {type(key).__name__}) and is "
                "ignored; keys are lower-case words like schedule"
            )
            continue
        check = CHECKS.get(key)
        if check is None:
            report.warn(unknown_key(key, KNOWN_KEYS), key=key)
            continue
        if value is None and key in NULL_OK:
            continue
        try:
            values[key] = check(value)
        except Bad as exc:
            report.error(f"{key}: {exc}", key=key)
        except lenient.Accepted as exc:
            values[key] = exc.value
            report.warn(f"{key}: {exc}", key=key)
    for key, example in (("id", "id: backup-db"), ("schedule", 'schedule: "0 3 * * *"')):
        if key not in data:
            report.error(
                f"{key}: missing; add a line like {example} before the closing '---' "
                f"(line {report.close_line})",
                key=key,
                line=report.close_line,
            )
    check_schedule(values, report, config)
    check_issue12_keys(values, report, config)
    check_issue26_keys(values, report)
    check_kind(values, body, report)
    if "cwd" in values and "cwd_policy" in values:
        report.error("cwd_policy: set either cwd or cwd_policy, not both", key="cwd_policy")
    if report.failed:
        return None
    values.setdefault("title", values["id"])
    if not values["title"]:
        values["title"] = values["id"]
    task = Task(path=report.path, body=body, **values)  # type: ignore[arg-type]
    check_paths(task, report, config)
    return task
