"""The tools self-heal gives the model, and the guard rails they enforce in code.

Every path the model names is resolved to its real path (`..` and symlinks followed) and must
land inside the home folder. Then:

- Writes go only to the task's own file and to files matched by its `heal_paths` globs (relative
  to the home; default: the script of a `run_as: script` task), matched on the *real* path, so a
  symlink cannot smuggle a write elsewhere. Never, whatever heal_paths says: the scheduler's code
  (`mdcron/`, `scheduler.py`, and the running package's own folder), `scheduler.yaml`,
  `prompts/`, `state/`, `logs/`, the Claude config folder, `.git/`, `.venv/`, `.env*` files and
  other tasks' files (editing another task would bypass its protected keys). Writes replace files
  atomically (temp + rename), which also never writes through a hard link.
- Reads go anywhere inside the home except where secrets live: `state/` (database, Claude
  credentials), the Claude config folder, `scheduler.yaml` (tokens, ${VAR} references), `.env*`
  files, `.git/` (remote URLs may hold tokens) and `logs/` other than this task's own run logs
  (other tasks' output may hold their secrets). Whatever is read is sent to the API.
- The task file may be edited, but only its prose and the frontmatter keys of HEAL_KEYS; a
  change to any other key (added, removed or changed; unknown keys too) is refused ("refused:
  heal tried to change `command`") and the file is not touched. The keys that decide what runs,
  where, when and as whom stay the person's. The edited file must still validate.
- The writable set is decided from the task as it was when the ladder started (the ladder hands
  every heal that same Task), so one heal cannot widen the next one's; it never holds a file in
  tasks/ other than the task's own, whatever the task's command or heal_paths say.
- Before the first byte of a file changes, its backup and the heal's intent are on disk
  (selfheal/journal.py): a heal killed half-way is rolled back by the next tick.
- A heal writes at most `max_heal_bytes` bytes in all; every file is backed up, with its
  relative path, under `logs/heal-backups/<id>/<UTC time>/` before its first change.

A refused call raises Refused; the caller answers it as a tool_result with is_error: true.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import safe_fs
from ..core.atomic_write import write_atomic
from ..core.private_files import make_private_dirs, write_private
from ..core.records import dataclass, field
from ..settings.config import Config
from ..tasks.paths import PathError, script_path
from ..tasks.task import Task
from ..tasks.taskfile import parse_task_text
from .task_keys import HEAL_KEYS, changed_keys

if TYPE_CHECKING:
    from .journal import HealJournal

FORBIDDEN_TOP = frozenset({"mdcron", "prompts", "state", "logs", ".git", ".venv"})
FORBIDDEN_FILES = frozenset({"scheduler.py", "scheduler.yaml"})
READ_LIMIT = 32 * 1024  # characters of a file returned by read_file
FILE_LIMIT = 16 << 20  # bytes: a bigger file is neither edited nor backed up by a heal
LIST_LIMIT = 200  # entries returned by list_dir
ECHO_LIMIT = 16 * 1024  # longer tool inputs are shortened when the conversation is sent again
MANIFEST = "MANIFEST.mdcron.json"
PACKAGE_DIR = Path(os.path.realpath(Path(__file__).parents[1]))

TOOLS: list[dict] = [
    {"name": "read_file", "description": "Read a text file. Paths are relative to the home.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                      "required": ["path"]}},
    {"name": "list_dir", "description": "List a folder of the home ('.' for the home itself).",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                      "required": ["path"]}},
    {"name": "replace_in_file",
     "description": "Replace the one occurrence of `old` with `new` in a writable file.",
     "input_schema": {"type": "object", "properties": {
         "path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
         "required": ["path", "old", "new"]}},
    {"name": "write_file", "description": "Create or replace a writable file with `content`.",
     "input_schema": {"type": "object", "properties": {
         "path": {"type": "string"}, "content": {"type": "string"}},
         "required": ["path", "content"]}},
    {"name": "finish", "description": "End the heal: say what was wrong and what you changed.",
     "input_schema": {"type": "object", "properties": {"diagnosis": {"type": "string"}},
                      "required": ["diagnosis"]}},
]


class Refused(Exception):
    """A tool call the guard rails do not allow; the message is the reason, for the model."""


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A home-relative glob as a regex on POSIX relative paths: `*` and `?` stay within one
    folder, `**/` spans folders, `[...]` is a character class."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write_bytes(path: Path, data: bytes, *, root: Path | None = None) -> None:
    """Bytes through the one atomic writer (backups may not be UTF-8). `path` is a real path
    (resolved by a check); the folders from `root` (default "/") to it are walked again without
    following a symlink, and the temporary file and the rename stay inside the folder found
    then: a folder swapped for a symlink after the check is refused (safe_fs.UnsafePath)."""
    write_atomic(path, data, root=root if root is not None else Path("/"))


@dataclass
class Sandbox:
    """One heal's view of the home: what it may read and write, what it changed."""

    config: Config
    task: Task
    backup_dir: Path  # created on the first write
    max_bytes: int
    home: Path = field(init=False)
    task_file: Path = field(init=False)
    patterns: list[tuple[str, re.Pattern[str]]] = field(init=False)
    extra_writable: set[Path] = field(init=False)
    never_write: list[Path] = field(init=False)
    never_read: list[Path] = field(init=False)
    originals: dict[Path, bytes | None] = field(default_factory=dict)  # real path -> before
    written: int = 0
    notes: list[str] = field(default_factory=list)  # heal_paths entries that were ignored
    journal: HealJournal | None = None  # told before each write (selfheal/journal.py)

    def __post_init__(self) -> None:
        self.home = Path(os.path.realpath(self.config.home))
        self.task_file = Path(os.path.realpath(self.task.path))
        self.patterns = []
        self.extra_writable = set()
        for raw in self.task.heal_paths:
            pattern = raw.strip().removeprefix("./")
            if not pattern or pattern.startswith(("/", "~")) or ".." in pattern.split("/"):
                self.notes.append(f"heal_paths entry {raw!r} ignored: use a glob inside the home")
                continue
            self.patterns.append((pattern, glob_regex(pattern)))
        if not self.task.heal_paths and self.task.run_as == "script":
            try:
                self.extra_writable.add(Path(os.path.realpath(script_path(self.task, self.config))))
            except PathError as exc:
                self.notes.append(f"the task's script is not writable: {exc}")
        config = self.config
        self.never_write = [PACKAGE_DIR, PACKAGE_DIR.parent / "scheduler.py"] + [
            Path(os.path.realpath(p))
            for p in (config.state_dir, config.logs_dir, config.prompts_dir, config.claude_dir)
        ]
        self.never_read = [Path(os.path.realpath(p)) for p in (config.state_dir, config.claude_dir)]
        if config.path is not None:
            self.never_read.append(Path(os.path.realpath(config.path)))

    # -- paths ---------------------------------------------------------------------------------

    def writable_summary(self) -> str:
        items = [self.rel(self.task_file)] + [self.rel(p) for p in sorted(self.extra_writable)]
        items += [p for p, _ in self.patterns]
        return ", ".join(dict.fromkeys(items))

    def rel(self, real: Path) -> str:
        try:
            return real.relative_to(self.home).as_posix() or "."
        except ValueError:
            return str(real)

    def resolve(self, path: object) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise Refused("expected a path (text), relative to the home")
        if "\x00" in path or len(path) > 4096:
            raise Refused("not a usable path")
        given = Path(os.path.expanduser(path))
        candidate = given if given.is_absolute() else self.home / given
        real = Path(os.path.realpath(candidate))
        if real != self.home and not real.is_relative_to(self.home):
            link = _symlink_on_the_way(self.home, candidate)
            why = f"a symlink ({link}) pointing" if link else "a path"
            raise Refused(f"{path!r} is {why} outside the home folder (it resolves to {real}); "
                          "self-heal works inside the home only")
        return real

    def _secret(self, real: Path) -> str | None:
        rel = self.rel(real)
        parts = rel.split("/")
        if parts[0] == "state" or rel == "scheduler.yaml" or any(
            real == p or real.is_relative_to(p) for p in self.never_read
        ):
            return "scheduler state, credentials and config are never read by self-heal"
        if parts[0] == ".git" or any(part.startswith(".env") for part in parts):
            return "it may hold credentials; self-heal does not read it"
        if parts[0] == "logs" and rel != "logs":
            own = f"logs/runs/{self.task.id}"
            if not (rel == "logs/runs" or rel == own or rel.startswith(own + "/")):
                return "only this task's own run logs (logs/runs/<id>/) may be read"
        return None

    def check_read(self, path: object) -> Path:
        real = self.resolve(path)
        reason = self._secret(real)
        if reason:
            raise Refused(f"cannot read {path!r}: {reason}")
        return real

    def check_write(self, path: object) -> Path:
        real = self.resolve(path)
        rel = self.rel(real)
        parts = rel.split("/")
        forbidden = (
            parts[0] in FORBIDDEN_TOP or rel in FORBIDDEN_FILES or real == self.home
            or any(part.startswith(".env") for part in parts)
            or any(real == p or real.is_relative_to(p) for p in self.never_write)
        )
        if forbidden:
            raise Refused(f"cannot write {path!r} ({rel}): the scheduler's own code, config, "
                          "prompts, state and logs are never changed by self-heal")
        if real == self.task_file:
            return real
        tasks_dir = Path(os.path.realpath(self.config.tasks_dir))
        if real.is_relative_to(tasks_dir):  # even when the command or heal_paths name it
            raise Refused(f"cannot write {path!r}: it is another task's file (or in tasks/); "
                          f"only {self.rel(self.task_file)} may be edited")
        if real in self.extra_writable or any(regex.match(rel) for _, regex in self.patterns):
            return real
        raise Refused(f"cannot write {path!r} ({rel}): self-heal may write only "
                      f"{self.writable_summary()} (the task file and its heal_paths)")

    # -- the tools -----------------------------------------------------------------------------

    def read_file(self, path: object) -> str:
        real = self.check_read(path)
        if not real.is_file():
            raise Refused(f"{path!r} is not a file" + ("" if real.exists() else " (not found)"))
        data = _read_regular(real, READ_LIMIT * 4, self.home, path)
        text = data.decode("utf-8", errors="replace")
        if len(text) > READ_LIMIT or len(data) > READ_LIMIT * 4:
            size = real.stat().st_size
            return text[:READ_LIMIT] + f"\n[... truncated: the file has {size} bytes]"
        return text

    def list_dir(self, path: object) -> str:
        real = self.check_read(path)
        if not real.is_dir():
            raise Refused(f"{path!r} is not a folder")
        lines = []
        for entry in sorted(os.scandir(real), key=lambda e: e.name)[:LIST_LIMIT]:
            if entry.is_symlink():
                kind = "link -> " + os.readlink(entry.path)
            elif entry.is_dir():
                kind = "dir"
            else:
                kind = f"{entry.stat().st_size} bytes"
            lines.append(f"{entry.name}\t{kind}")
        return "\n".join(lines) or "(empty)"

    def replace_in_file(self, path: object, old: object, new: object) -> str:
        real = self.check_write(path)
        if not isinstance(old, str) or not isinstance(new, str) or not old:
            raise Refused("old (non-empty) and new must be text")
        current = self._current_text(real, path)
        count = current.count(old)
        if count != 1:
            raise Refused(f"`old` occurs {count} times in {path!r}; it must occur exactly once "
                          "(include more surrounding text)")
        self._write(real, current.replace(old, new, 1))
        return f"replaced 1 occurrence in {self.rel(real)}"

    def write_file(self, path: object, content: object) -> str:
        real = self.check_write(path)
        if not isinstance(content, str):
            raise Refused("content must be text")
        if real.exists() and not real.is_file():
            raise Refused(f"{path!r} exists and is not a regular file")
        if not real.parent.is_dir():
            raise Refused(f"the folder of {path!r} does not exist; self-heal creates no folders")
        self._write(real, content)
        return f"wrote {len(content.encode('utf-8'))} bytes to {self.rel(real)}"

    def _current_text(self, real: Path, path: object) -> str:
        if not real.is_file():
            raise Refused(f"{path!r} is not a file" + ("" if real.exists() else " (not found)"))
        try:
            return _read_regular(real, FILE_LIMIT, self.home, path).decode("utf-8")
        except UnicodeDecodeError:
            raise Refused(f"{path!r} is not UTF-8 text; use write_file to replace it") from None

    def _write(self, real: Path, text: str) -> None:
        data = text.encode("utf-8")
        left = self.max_bytes - self.written
        if len(data) > left:
            raise Refused(f"writing {len(data)} bytes would exceed this heal's limit of "
                          f"{self.max_bytes} bytes ({left} left)")
        if real == self.task_file:
            self._check_task_text(text)
        self._backup(real)
        if self.journal is not None:  # on disk before the first byte of the file changes
            self.journal.intend(self.rel(real), self.originals[real], self._backup_of(real),
                                sha256(data))
        write_atomic(real, text, root=self.home)
        self.written += len(data)

    def _check_task_text(self, text: str) -> None:
        before = self.originals.get(self.task_file)
        if before is None:
            before = _read_regular(self.task_file, FILE_LIMIT, self.home,
                                   self.rel(self.task_file))
        changed = changed_keys(before.decode("utf-8", errors="replace"), text)
        refused = [k for k in changed or () if k not in HEAL_KEYS]
        if refused:
            keys = ", ".join(f"`{k}`" for k in refused)
            raise Refused(
                f"refused: heal tried to change {keys}: {', '.join(refused)} may not be changed "
                f"by self-heal (it may change the task's prose and {', '.join(HEAL_KEYS)} only); "
                "the file was not written")
        new, problems = parse_task_text(text, self.task.path, self.config)
        if new is None:
            errors = "; ".join(str(p) for p in problems if p.severity == "error") or "; ".join(
                str(p) for p in problems)  # issue 25: "not a task" is a warning, still refused
            raise Refused(f"the edited task file would not validate, so it was not written: "
                          f"{errors}")

    def _backup(self, real: Path) -> None:
        if real in self.originals:
            return
        make_private_dirs(self.backup_dir, root=self.config.home)
        try:
            before = _read_regular(real, FILE_LIMIT, self.home, real)
        except FileNotFoundError:
            before = None
        if before is not None:
            write_private(self._backup_of(real), before, root=self.config.home)
        self.originals[real] = before

    def _backup_of(self, real: Path) -> Path:
        return self.backup_dir / self.rel(real)

    # -- the outcome ---------------------------------------------------------------------------

    def changed(self) -> list[Path]:
        return [p for p, before in self.originals.items() if _read(p) != before]

    def diff(self) -> str:
        chunks = []
        for real in self.changed():
            rel = self.rel(real)
            before, after = self.originals[real], _read(real)
            try:
                a = (before or b"").decode("utf-8").splitlines(keepends=True)
                b = (after or b"").decode("utf-8").splitlines(keepends=True)
            except UnicodeDecodeError:
                chunks.append(f"Binary file {rel} changed\n")
                continue
            lines = difflib.unified_diff(a, b, "/dev/null" if before is None else f"a/{rel}",
                                         f"b/{rel}")
            chunks.append("".join(line if line.endswith("\n") else line + "\n\\ No newline "
                                  "at end of file\n" for line in lines))
        return "".join(chunks)

    def write_manifest(self, heal_id: str) -> None:
        if not self.originals:
            return
        files = [
            {"path": self.rel(p), "existed": before is not None,
             "before_sha256": sha256(before) if before is not None else None,
             "after_sha256": sha256(after) if (after := _read(p)) is not None else None}
            for p, before in self.originals.items()
        ]
        record = {"task": self.task.id, "heal": heal_id, "home": str(self.home), "files": files}
        write_private(self.backup_dir / MANIFEST, json.dumps(record, indent=1).encode(),
                      root=self.config.home)

    def roll_back(self) -> None:
        """Put every file this heal touched back as it was."""
        for real, before in self.originals.items():
            if before is None:
                try:
                    real.unlink()
                except FileNotFoundError:
                    pass
            elif _read(real) != before:
                atomic_write_bytes(real, before, root=self.home)


def _read(path: Path) -> bytes | None:
    """What is at `path` now; None when nothing regular is (a FIFO swapped in is not waited on,
    and roll_back then puts the original back in its place)."""
    try:
        return safe_fs.read_regular(path, FILE_LIMIT)
    except (FileNotFoundError, safe_fs.NotRegular):
        return None


def _read_regular(real: Path, limit: int, home: Path, shown: object) -> bytes:
    """A file the heal reads or edits, walked from the home without following a symlink; a
    FIFO or device swapped in after the check is refused, never waited on."""
    try:
        data = safe_fs.read_regular(real, limit, root=home)
    except safe_fs.UnsafePath as exc:
        raise Refused(f"cannot use {shown!r}: {exc}") from None
    if limit == FILE_LIMIT and len(data) > limit:
        raise Refused(f"{shown!r} is larger than {limit} bytes; self-heal leaves it alone")
    return data


def _symlink_on_the_way(home: Path, candidate: Path) -> str | None:
    """The first symlink among the candidate's components (for messages)."""
    path = Path(os.path.abspath(candidate))
    for parent in [*reversed(path.parents), path]:
        if parent.is_symlink():
            return str(parent)
    return None
