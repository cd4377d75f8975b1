"""Where a task runs and what it runs: folders and scripts kept inside the home folder.

A task file may name a working folder (`cwd`, or a `cwd_policy` from scheduler.yaml) and, for
`run_as: script`, a script. Both are resolved with symlinks followed, so a link inside the home
that points elsewhere counts as elsewhere. Anything outside the home is refused unless it lies in
one of the folders listed under `allow_outside_home` in scheduler.yaml.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from ..settings.config import Config
from .task import Task

_ALLOW_HINT = "add it to allow_outside_home in scheduler.yaml if that is intended"


class PathError(ValueError):
    """A path that cannot be used; the message says why and what would be right."""


def _resolve(path: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError, ValueError) as exc:  # loops, NUL bytes, odd names
        raise PathError(f"{str(path)!r} cannot be resolved: {exc}") from exc


def resolve_inside(
    base: Path, path: str, *, home: Path, allowed: Sequence[str] = ()
) -> Path:
    """`base / path` (or `path` itself when absolute; `~` expanded), symlinks resolved.

    The result must be the home folder, inside it, or inside one of `allowed` (relative entries
    count from the home). Otherwise PathError, naming the path and the home."""
    if not isinstance(path, str) or not path.strip():
        raise PathError(f"expected a path, got {path!r}")
    if "\x00" in path:
        raise PathError(f"{path!r} contains a NUL byte")
    home_real = _resolve(home)
    target = _resolve(Path(base) / os.path.expanduser(path))
    roots = [home_real] + [_resolve(home_real / os.path.expanduser(a)) for a in allowed]
    if any(target == root or target.is_relative_to(root) for root in roots):
        return target
    where = f"{path!r}" if str(target) == path else f"{path!r} (= {target})"
    raise PathError(f"{where} escapes the home folder {home_real}; {_ALLOW_HINT}")


def task_cwd(task: Task, config: Config) -> Path:
    """The folder a task runs in: its `cwd`, else its `cwd_policy`'s folder, else the home."""
    home = config.home
    allowed = config.allow_outside_home
    if task.cwd is not None:
        return resolve_inside(home, task.cwd, home=home, allowed=allowed)
    if task.cwd_policy is not None:
        folder = config.cwd_policies.get(task.cwd_policy)
        if folder is None:
            known = ", ".join(sorted(config.cwd_policies)) or "none are defined"
            raise PathError(
                f"unknown cwd_policy {task.cwd_policy!r}; use one defined under cwd_policies "
                f"in scheduler.yaml ({known})"
            )
        return resolve_inside(home, folder, home=home, allowed=allowed)
    return _resolve(home)


def script_word(command: str) -> str:
    """The script a `run_as: script` command starts: its first shell word."""
    import shlex  # lazy: a script task only (issue 27: not before a shell task starts)

    try:
        words = shlex.split(command)
    except ValueError as exc:  # unbalanced quotes
        raise PathError(f"the command cannot be split into words: {exc}") from exc
    if not words:
        raise PathError("the command is empty; name a script, e.g. command: scripts/backup.sh")
    return words[0]


def script_path(task: Task, config: Config) -> Path:
    """The script of a `run_as: script` task, relative to the task's folder, inside the home.

    PathError when the command is empty, the script escapes the home or does not exist."""
    word = script_word(task.command or "")
    cwd = task_cwd(task, config)
    path = resolve_inside(cwd, word, home=config.home, allowed=config.allow_outside_home)
    if not path.exists():
        raise PathError(
            f"script {word!r} not found (looked for {path}); paths count from the task's "
            f"folder {cwd}"
        )
    if not path.is_file():
        raise PathError(f"script {word!r} is not a file ({path})")
    return path


def script_problem(path: Path, word: str) -> str | None:
    """Why the script at `path` would not start (issue 25: `validate` says it before the run
    does): not executable, or a text file without a `#!` line (exec fails with ENOEXEC)."""
    import shlex  # lazy: as script_word

    if not os.access(path, os.X_OK):
        return (f"script {word!r} is not executable, so runs will fail; fix: chmod +x "
                f"{shlex.quote(str(path))}")
    try:  # O_NONBLOCK: a FIFO swapped in after the check must not hang validation
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None  # unreadable to us (another user's script): the run decides
    try:
        head = os.read(fd, 4) if stat.S_ISREG(os.fstat(fd).st_mode) else b"#!"
    except OSError:
        head = b"#!"
    finally:
        os.close(fd)
    if head.startswith(b"#!") or head == b"\x7fELF":
        return None
    return (f"script {word!r} has no '#!' line, so it cannot be started directly; make its first"
            " line e.g. #!/bin/sh, or use run_as: shell with command: sh " + shlex.quote(word))
