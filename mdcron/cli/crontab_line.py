"""The crontab line that runs the tick: rendered in one place, and read back as the shell would.

`render` is the only source of the line: the README shows it (with the README's example values,
checked by a test), `doctor` suggests it, and `install --cron` writes it. `parse` reads any
crontab line the way cron's `/bin/sh -c` would run it: `cd DIR` first, so a relative interpreter
or `--home` is resolved against the folder the line changes into, not against the home.

Pure but for `resolve_python` (a PATH search): doctor and install pass in what they found.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping

from ..core.records import dataclass, field

SCHEDULE = "* * * * *"
CRON_PATH = "/usr/bin:/bin"  # Debian cron's PATH for a line that sets none
LOG = "logs/tick.log"


def render(home: str, python: str, script: str = "scheduler.py",
           path: str | None = None, exit_zero: bool = False) -> str:
    """`* * * * * cd HOME && [PATH=…] MDCRON_HOME=HOME exec PYTHON SCRIPT tick >> LOG 2>&1`
    (`tick --exit-zero` with `exit_zero`: a failed task does not make cron mail).

    `cd` first so relative paths and the log land in the home; MDCRON_HOME on the command (not
    a crontab-wide variable) so other lines of the crontab are untouched; PATH only when given
    (the tasks' commands see it, as they saw it where `install` ran). Never a secret. `exec`:
    cron's shell is replaced by the tick rather than waiting, readable, with the crontab's
    environment (procguard.py)."""
    env = ([f"PATH={shlex.quote(path)}"] if path else []) + [f"MDCRON_HOME={shlex.quote(home)}"]
    command = (f"cd {shlex.quote(home)} && {' '.join(env)} exec {shlex.quote(python)}"
               f" {shlex.quote(script)} tick{' --exit-zero' if exit_zero else ''} >> {LOG} 2>&1")
    return f"{SCHEDULE} {_escape_percent(command)}"


def _escape_percent(command: str) -> str:
    # cron turns an unescaped % into a newline (stdin for the command): escape every one.
    return command.replace("%", "\\%")


def _unescape_percent(command: str) -> str:
    """As cron reads it: `\\%` is a %, a bare % ends the command (the rest is its stdin)."""
    out, i = [], 0
    while i < len(command):
        if command.startswith("\\%", i):
            out.append("%")
            i += 2
        elif command[i] == "%":
            break
        else:
            out.append(command[i])
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class TickLine:
    """What a crontab line that runs `scheduler.py tick` does, resolved as the shell would."""

    cwd: str | None  # the folder the line cd's into (None: cron's start folder, $HOME)
    python: str  # the interpreter as written
    python_path: str | None  # absolute when it can be known without a PATH search
    script: str  # scheduler.py, absolute when the line says where it is
    home: str | None  # --home, else MDCRON_HOME, else the folder holding scheduler.py
    env: dict[str, str] = field(default_factory=dict)
    schedule: str = SCHEDULE  # the line's five fields (or @macro), as written
    log: str | None = None  # where `>> file` sends the tick's output, resolved like the rest


def command_part(line: str) -> str | None:
    """The command of a crontab entry (after the five fields or the @macro); None for
    comments, blank lines and `NAME=value` environment lines."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    if text.startswith("@"):
        parts = text.split(None, 1)
        return parts[1] if len(parts) == 2 else None
    parts = text.split(None, 5)
    if len(parts) < 6 or "=" in parts[0]:
        return None
    return parts[5]


def parse(line: str, cron_home: str | None = None) -> TickLine | None:
    """The tick this crontab line starts, or None when it starts none. `cron_home` is the
    folder cron starts the command in (the user's home), for a line without `cd`."""
    command = command_part(line)
    if command is None:
        return None
    command = _unescape_percent(command)
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return None
    cwd = cron_home
    for simple in _simple_commands(words):
        env: dict[str, str] = {}
        while simple:  # `NAME=value`, `exec`, `env NAME=value …` before the command
            if simple[0] in ("exec", "env"):
                simple.pop(0)
            elif "=" in simple[0] and simple[0].split("=", 1)[0].isidentifier():
                name, value = simple.pop(0).split("=", 1)
                env[name] = value
            else:
                break
        if not simple:
            continue
        if simple[0] == "cd":
            target = simple[1] if len(simple) > 1 else (cron_home or "")
            cwd = _join(cwd, os.path.expanduser(target)) if target else cwd
            continue
        scripts = [i for i, w in enumerate(simple) if os.path.basename(w) == "scheduler.py"]
        if not scripts or "tick" not in simple[scripts[0] + 1:]:
            continue
        at = scripts[0]
        python = simple[at - 1] if at > 0 else ""
        script = _join(cwd, simple[at])
        home = _option(simple[at + 1:], "--home") or _option(simple[:at], "--home")
        if home is not None:
            home = _join(cwd, home)
        elif "MDCRON_HOME" in env:
            home = _join(cwd, env["MDCRON_HOME"])
        else:
            home = os.path.dirname(script) if os.path.isabs(script) else None
        python_path = _join(cwd, python) if "/" in python else None
        log = _redirect(words)
        return TickLine(cwd, python, python_path, script, home and os.path.normpath(home), env,
                        schedule_part(line), _join(cwd, os.path.expanduser(log)) if log else None)
    return None


def schedule_part(line: str) -> str:
    """The five time fields of a crontab entry (or its @macro), spaces normalised."""
    text = line.strip()
    return text.split(None, 1)[0] if text.startswith("@") else " ".join(text.split(None, 5)[:5])


def every_minute(schedule: str) -> bool:
    """True for `* * * * *` (and `*/1`), the only cadence a tick line may have."""
    return all(f in ("*", "*/1") for f in schedule.split()) and len(schedule.split()) == 5


def _redirect(words: list[str]) -> str | None:
    """The file of the first `> file` / `>> file` (stdout) redirection."""
    for i, w in enumerate(words[:-1]):
        if w in (">", ">>") and not (i and words[i - 1] == "2") and words[i + 1] not in (
                "&", ">&"):
            return words[i + 1]
    return None


def _simple_commands(words: list[str]) -> list[list[str]]:
    """Split at `&&`, `||`, `;`, `|`; drop redirections (`>> file`, `2>&1`)."""
    out: list[list[str]] = [[]]
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w in ("&&", "||", ";", "|", "&"):
            out.append([])
        elif w in (">", ">>", "<", ">&", "<&"):
            skip = True
            if out[-1] and out[-1][-1].isdigit():
                out[-1].pop()  # the 2 of `2>&1`
        else:
            out[-1].append(w)
    return [c for c in out if c]


def _option(words: list[str], name: str) -> str | None:
    for i, w in enumerate(words):
        if w == name and i + 1 < len(words):
            return words[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return None


def _join(cwd: str | None, path: str) -> str:
    if os.path.isabs(path) or cwd is None:
        return os.path.normpath(path) if os.path.isabs(path) else path
    return os.path.normpath(os.path.join(cwd, path))


def resolve_python(tick: TickLine, environ: Mapping[str, str]) -> str:
    """The interpreter cron would start: as written when it has a slash (resolved against the
    line's `cd`), else looked up on the line's PATH, else cron's default PATH."""
    if tick.python_path:
        return tick.python_path
    search = tick.env.get("PATH") or environ.get("PATH") or CRON_PATH
    return shutil.which(tick.python, path=search) or tick.python


def exit_zero(line: str) -> bool:
    """Whether this crontab line's tick has `--exit-zero` (install keeps a hand-added one)."""
    command = command_part(line)
    try:
        words = shlex.split(_unescape_percent(command or ""))
    except ValueError:
        return False
    return "tick" in words and "--exit-zero" in words[words.index("tick"):]


def line_for(home: str, environ: Mapping[str, str], exit_zero: bool = False) -> str:
    """The line for this home, this interpreter and this checkout, with the caller's PATH:
    what `install --cron` writes and `doctor` suggests."""
    code = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = "scheduler.py" if os.path.realpath(code) == os.path.realpath(home) else os.path.join(
        code, "scheduler.py")
    return render(home, sys.executable, script, environ.get("PATH") or None, exit_zero)
