"""`install` / `uninstall`: the tick in this user's crontab, or systemd units.

Crontab: the line comes from crontab_line.render (the one the README shows and doctor
suggests), under a marker comment naming the home. It goes in through the real `crontab`
command (`crontab -l`, edit, `crontab -`), so cron's own checks apply. A second install changes
nothing; other lines are kept byte for byte; `uninstall` removes the marker and its line only.

systemd: by default one long-running service for `scheduler.py daemon` (ticks every minute,
a long tick never delays the next one, as under cron). `KillMode=mixed`: on stop SIGTERM goes
to the daemon alone, which gives running tasks `stop_grace` and records what it has to kill;
systemd's SIGKILL to the whole group comes only after `TimeoutStopSec` (longer than that
grace). The default `control-group` would SIGTERM every task at once.

`--timer` writes a `.timer` (`OnCalendar=minutely`, `Persistent=true`, `AccuracySec=1s`: the
default accuracy is a whole minute) and a `Type=oneshot` `.service` for `tick`. When a oneshot's
main process exits, systemd stops the unit and, under the default `KillMode=control-group`,
kills every process still in its cgroup. The tick waits for its tasks, so what is left then is
only a task's deliberately detached process, or the tasks of a tick that was itself killed (the
task keeps its lock and the next tick records it, as under cron). `KillMode=process` leaves them
to mdcron, as cron does. Caveat: while a oneshot is still running, the timer cannot start it
again, so a tick that runs long delays the next one; the daemon service does not have that
limit, hence the default.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ..core.private_files import open_private
from ..core.records import dataclass
from .crontab_line import exit_zero as has_exit_zero
from .crontab_line import line_for, parse

CODE = Path(__file__).resolve().parents[2]
MARKER = "# mdcron tick for {home} (added by `scheduler.py install --cron`; `uninstall --cron`" \
    " removes it)"


class InstallError(Exception):
    """Nothing was changed; the message says why and what to do."""


# --------------------------------------------------------------------- what a line may carry


def refuse_unwritable(value: str, what: str, *, systemd: bool = False) -> None:
    """Refuse a path or value that the crontab or a unit file cannot carry as written.

    A newline in a home path once became three crontab entries of an attacker's choosing and an
    `ExecStartPre=`. Any character that is not printable (control characters, DEL, C1 codes such
    as NEL, the Unicode line and paragraph separators that Python's own `splitlines` breaks at,
    bidi overrides, bytes that are not UTF-8) is refused for both targets. A unit file also
    joins a line that ends in a backslash with the next, and `WorkingDirectory=` takes its value
    unquoted: a backslash or edge white space is refused there as well. Everything else is
    quoted by `shlex.quote` (crontab, with `%` escaped) or `_quote` (systemd)."""
    for at, char in enumerate(value):
        if not char.isprintable() or (systemd and char == "\\"):
            raise InstallError(
                f"{what} {value!r} holds {_describe(char)} at position {at + 1}, which"
                f" {'a systemd unit' if systemd else 'a crontab line'} cannot carry safely;"
                " nothing was changed. Rename the folder (or use a path without it), then"
                " install again")
    if systemd and value != value.strip():
        raise InstallError(f"{what} {value!r} starts or ends with white space, which a systemd"
                           " unit drops; nothing was changed. Use a path without it")


def _describe(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"the byte 0x{code - 0xDC00:02x} (not UTF-8)"
    names = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab",
             "\\": "a backslash"}
    return names.get(char, f"the character U+{code:04X}")


# --------------------------------------------------------------------- crontab (pure)


def add_cron_line(listing: str, home: str, line: str) -> tuple[str | None, str]:
    """The new crontab text (None: unchanged) and what happened."""
    lines = listing.splitlines()
    marker = MARKER.format(home=home)
    if marker in lines:
        at = lines.index(marker)
        if at + 1 < len(lines) and lines[at + 1] == line:
            return None, "already installed; nothing changed"
        if at + 1 < len(lines) and _is_ours(lines[at + 1], home):
            lines[at + 1] = line
            return _join(lines), f"updated the line for {home}"
        lines.insert(at + 1, line)
        return _join(lines), f"restored the line for {home}"
    for existing in lines:
        if _is_ours(existing, home):
            raise InstallError(f"the crontab already runs the tick for {home} (a line not added"
                               f" by install): {existing.strip()!r}; keep it, or delete it with"
                               " `crontab -e` and install again")
    return _join([*lines, marker, line]), f"added the tick for {home}"


def _installed_exit_zero(listing: str, home: str) -> bool:
    """The line under this home's marker has `--exit-zero`."""
    lines = listing.splitlines()
    marker = MARKER.format(home=home)
    if marker not in lines:
        return False
    at = lines.index(marker) + 1
    return at < len(lines) and _is_ours(lines[at], home) and has_exit_zero(lines[at])


def remove_cron_line(listing: str, home: str) -> tuple[str | None, str]:
    lines = listing.splitlines()
    marker = MARKER.format(home=home)
    if marker not in lines:
        return None, f"no line added by install for {home}; nothing changed"
    at = lines.index(marker)
    drop = [at]
    if at + 1 < len(lines) and _is_ours(lines[at + 1], home):
        drop.append(at + 1)
    kept = [s for i, s in enumerate(lines) if i not in drop]
    return _join(kept), f"removed the tick for {home}"


def _is_ours(line: str, home: str) -> bool:
    tick = parse(line)
    return tick is not None and tick.home is not None and (
        os.path.realpath(tick.home) == os.path.realpath(home))


def _join(lines: list[str]) -> str:
    return "\n".join(lines) + "\n" if lines else ""


# --------------------------------------------------------------------- crontab (I/O)


def _crontab_binary(environ: Mapping[str, str]) -> str:
    binary = shutil.which("crontab", path=environ.get("PATH"))
    if binary is None:
        raise InstallError("no `crontab` command on PATH: install cron (Debian: `apt-get install"
                           " cron`), or use `scheduler.py daemon` or `install --systemd`")
    return binary


def read_crontab(environ: Mapping[str, str]) -> str:
    out = subprocess.run([_crontab_binary(environ), "-l"], capture_output=True, text=True,
                         timeout=30, env=dict(environ))
    if out.returncode != 0:
        if "no crontab for" in out.stderr:
            return ""
        raise InstallError(f"`crontab -l` failed: {out.stderr.strip() or out.returncode}")
    return out.stdout


def write_crontab(text: str, environ: Mapping[str, str]) -> None:
    out = subprocess.run([_crontab_binary(environ), "-"], input=text, capture_output=True,
                         text=True, timeout=30, env=dict(environ))
    if out.returncode != 0:
        raise InstallError(f"`crontab -` refused the new crontab: {out.stderr.strip()}")


def _refuse_cron_values(home: Path, environ: Mapping[str, str]) -> None:
    refuse_unwritable(str(home), "the home")
    refuse_unwritable(sys.executable, "the Python interpreter")
    refuse_unwritable(str(CODE), "the mdcron checkout")
    refuse_unwritable(environ.get("PATH", ""), "PATH")


def install_cron(home: Path, environ: Mapping[str, str], dry_run: bool,
                 exit_zero: bool = False) -> str:
    """`exit_zero`: the line's tick gets `--exit-zero`; one already on the installed line
    (added by hand, or by an earlier `install --cron --exit-zero`) is kept (issue 25)."""
    _refuse_cron_values(home, environ)
    try:
        listing = read_crontab(environ)
    except InstallError:
        if not dry_run:
            raise
        listing = ""  # --print without a crontab command: the line as it would be
    exit_zero = exit_zero or _installed_exit_zero(listing, str(home))
    line = line_for(str(home), environ, exit_zero)
    if dry_run:
        return f"{MARKER.format(home=home)}\n{line}"
    text, what = add_cron_line(listing, str(home), line)
    # the line's `>> logs/tick.log` is opened by the shell before the tick can create logs/,
    # and the shell's umask (022) would make the log readable by others: create both owner-only
    # (logs/ walked from the home, never through a symlink: core/safe_fs.py)
    os.close(open_private(home / "logs" / "tick.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                          root=home))
    if text is not None:
        write_crontab(text, environ)
    return f"{what}:\n{line}" if text is not None else what


def uninstall_cron(home: Path, environ: Mapping[str, str]) -> str:
    refuse_unwritable(str(home), "the home")  # its marker line could not be found either
    text, what = remove_cron_line(read_crontab(environ), str(home))
    if text is not None:
        write_crontab(text, environ)
    return what


# --------------------------------------------------------------------- systemd


@dataclass(frozen=True, slots=True)
class Unit:
    name: str
    text: str


def unit_name(home: Path) -> str:
    # systemd takes only ASCII letters, digits and `:_.-\` in a unit name
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in home.name)[:32] or "home"
    return f"mdcron-{slug}-{hashlib.sha256(str(home).encode()).hexdigest()[:6]}"


def _quote(value: str) -> str:
    """A systemd word: double-quoted, with `%` (specifiers) and `$` (variables) escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return '"' + escaped.replace("$", "$$") + '"'


def _env_line(name: str, value: str) -> str:
    return "Environment=" + _quote(f"{name}={value}").replace("$$", "$")


def systemd_units(home: Path, environ: Mapping[str, str], user: bool, timer: bool,
                  stop_grace: float, kill_grace: float) -> list[Unit]:
    for value, what in ((str(home), "the home"), (sys.executable, "the Python interpreter"),
                        (str(CODE), "the mdcron checkout"), (environ.get("PATH", ""), "PATH")):
        refuse_unwritable(value, what, systemd=True)
    name = unit_name(home)
    script = "scheduler.py" if home == CODE else str(CODE / "scheduler.py")
    # WorkingDirectory takes the rest of the line as it is: no quotes, only % escaped
    common = [f"WorkingDirectory={str(home).replace('%', '%%')}",
              _env_line("MDCRON_HOME", str(home))]
    if environ.get("PATH"):
        common.append(_env_line("PATH", environ["PATH"]))
    if not user:
        common.append(f"User={pwd.getpwuid(os.getuid()).pw_name}")
    run = f"{_quote(sys.executable)} -u {_quote(script)}"

    def head(what: str) -> str:
        return f"[Unit]\nDescription=mdcron {what} for {str(home).replace('%', '%%')}\n\n"

    if not timer:
        stop = int(stop_grace + kill_grace + 15)
        service = (head("daemon") + "[Service]\nType=simple\n" + "\n".join(common)
                   + f"\nExecStart={run} daemon\nKillMode=mixed\nTimeoutStopSec={stop}\n"
                   "Restart=on-failure\nRestartSec=5\n\n[Install]\n"
                   f"WantedBy={'default.target' if user else 'multi-user.target'}\n")
        return [Unit(f"{name}-daemon.service", service)]
    service = (head("tick") + "[Service]\nType=oneshot\n" + "\n".join(common)
               + f"\nExecStart={run} tick\nKillMode=process\n")
    timer_text = (head("tick every minute") + "[Timer]\nOnCalendar=minutely\n"
                  "Persistent=true\nAccuracySec=1s\n"
                  f"Unit={name}-tick.service\n\n[Install]\nWantedBy=timers.target\n")
    return [Unit(f"{name}-tick.service", service), Unit(f"{name}-tick.timer", timer_text)]


def unit_dir(user: bool, environ: Mapping[str, str]) -> Path:
    if not user:
        return Path("/etc/systemd/system")
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(environ.get("HOME") or "~", ".config")
    return Path(os.path.expanduser(base)) / "systemd" / "user"


def _systemctl(user: bool, *args: str) -> str | None:
    """Run systemctl when systemd manages this machine; None when it does not (containers,
    tests): then the caller prints the command instead."""
    if not os.path.isdir("/run/systemd/system") or shutil.which("systemctl") is None:
        return None
    argv = ["systemctl", *(["--user"] if user else []), *args]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return f"$ {' '.join(argv)}" + (f" (failed: {out.stderr.strip()})" if out.returncode else "")


def install_systemd(units: list[Unit], folder: Path, user: bool, dry_run: bool) -> str:
    if dry_run:
        return "\n".join(f"# {folder / u.name}\n{u.text}" for u in units)
    folder.mkdir(parents=True, exist_ok=True)
    changed = []
    for unit in units:
        path = folder / unit.name
        if path.exists() and path.read_text(encoding="utf-8") == unit.text:
            continue
        tmp = path.with_name(f".{unit.name}.tmp")
        tmp.write_text(unit.text, encoding="utf-8")
        os.replace(tmp, path)
        changed.append(str(path))
    lines = [("wrote " + ", ".join(changed)) if changed else "already installed; nothing changed"]
    ctl = "systemctl --user" if user else "systemctl"
    done = [_systemctl(user, "daemon-reload"), _systemctl(user, "enable", "--now", units[-1].name)]
    if None in done:
        lines.append(f"then: {ctl} daemon-reload && {ctl} enable --now {units[-1].name}")
    else:
        lines += [d for d in done if d]
    return "\n".join(lines)


def uninstall_systemd(home: Path, folder: Path, user: bool) -> str:
    name = unit_name(home)
    paths = [folder / f"{name}{suffix}"
             for suffix in ("-tick.timer", "-tick.service", "-daemon.service")]
    present = [p for p in paths if p.exists()]
    if not present:
        return f"no units for {home} in {folder}; nothing changed"
    # disable first: the enable symlinks are install's doing too, and must not dangle
    done = [_systemctl(user, "disable", "--now", *(p.name for p in present))]
    for path in present:
        path.unlink()
    done.append(_systemctl(user, "daemon-reload"))
    lines = [f"removed {', '.join(str(p) for p in present)}"]
    if None in done:
        ctl = "systemctl --user" if user else "systemctl"
        lines.append(f"if they were enabled: {ctl} disable --now"
                     f" {' '.join(p.name for p in present)}; {ctl} daemon-reload")
    else:
        lines += [d for d in done if d]
    return "\n".join(lines)
