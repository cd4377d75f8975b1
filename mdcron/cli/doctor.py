"""What is wrong with this home (`doctor`).

`doctor` checks the home (Python, folders and their permissions, the config, the destinations,
the state database, the crontab line, the API key, the task files) and prints each problem
with its fix. It only reads: it never creates, repairs or migrates anything.

The state database's checks are in doctor_state.py; the alerts sent when the tick cannot run
at all, in emergency.py.

Lazy imports: each check loads what it alone needs (yaml, apprise, the PostgreSQL probe, fcntl,
subprocess, the crontab reader, the cache loader), so a check that does not apply costs nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core.envref import ENV_REF
from ..core.problems import Problem
from ..settings.config import CONFIG_NAME, Config, ConfigError, load_config
from ..settings.notify import scheme_of
from ..state.meta import read_prefixed
from ..tasks.task import TaskSet
from .doctor_state import Check, database_check, last_tick, read_only, state_check
from .requirements import MIN_PYTHON

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .crontab_line import TickLine


def run_doctor(home: Path, environ: Mapping[str, str], now: float,
               found: TaskSet | None = None, integrity_age: float = 0.0) -> list[Check]:
    """Every check, in the order a person would fix things. Reads only. `found`: the task set
    when the caller has it already (the dashboard's cached one); else read once, here.
    `integrity_age`: a passed integrity check of the same database file this process made
    less than this many seconds ago is reused (the polled Health page; 0: always check)."""
    checks = [_python()]
    checks += _folders(home)
    config, config_checks = _config(home, environ)
    checks += config_checks
    checks.append(state_check(config) if config is not None and config.state_url
                  else database_check(home, integrity_age))
    checks.append(last_tick(home, now))
    ticker = _crontab_or_daemon(home, environ, now)
    checks += ticker
    from .doctor_units import unit_checks  # lazy: issue 25, only what systemd units need

    checks += [Check("systemd", *unit) for unit in unit_checks(home, environ)]
    daemon = any(c.name == "daemon" and c.status == "ok" for c in ticker)
    if config is not None and found is None:
        from ..schedule.cache import load_task_set

        found = load_task_set(config)  # once: three checks read it (issue 24: Health 929 ms)
    checks.append(_api_key(found, environ, daemon))
    if config is not None and found is not None:
        checks.append(_tasks(found, config.tasks_dir))
        checks.append(_task_users(config, found))
        checks += _held(home)
        checks += _prompts(config)
    return checks


def _prompts(config: Config) -> list[Check]:
    """Which prompt template is in use (the home's own or the shipped one), and whether it
    can be used."""
    from ..claude.templates import PLACEHOLDERS, check_template

    checks = []
    for name in PLACEHOLDERS:
        source, broken = check_template(config, name)
        if broken is None:
            checks.append(Check(f"prompt {name}", "ok", source.describe()))
        else:
            checks.append(Check(f"prompt {name}", "fail", f"{source.describe()}: {broken}",
                                f"fix {source.path}, or delete it to use the shipped default"))
    return checks


def _python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    if tuple(sys.version_info[:2]) >= MIN_PYTHON:
        return Check("python", "ok", f"Python {version} ({sys.executable})")
    return Check("python", "fail", f"Python {version} is too old",
                 "install Python 3.11 or newer and recreate .venv with it")


def _links(home: Path) -> Check:
    """The folders mdcron writes into must be real folders: every write walks them without
    following a symlink (core/safe_fs.py), so a link there makes those writes fail."""
    places = [home / p for p in ("tasks", "state", "state/locks", "state/resources", "logs",
                                 "logs/runs", "logs/heal-backups", "logs/incidents")]
    runs = home / "logs" / "runs"
    if runs.is_dir() and not runs.is_symlink() and not (home / "logs").is_symlink():
        places += sorted(runs.iterdir())
    links = [p for p in places if p.is_symlink()]
    if not links:
        return Check("symlinks", "ok", "no symlink where mdcron writes (tasks/, state/, logs/)")
    shown = ", ".join(str(p) for p in links[:5]) + (" ..." if len(links) > 5 else "")
    return Check("symlinks", "fail", f"{shown}: a symlink where mdcron writes; those writes"
                 " are refused (runs fail; for state/ nothing runs; for tasks/ `disable` and"
                 " suspensions cannot edit the files)",
                 "replace each link with a real folder (move its content in)")


def _private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


def _folders(home: Path) -> list[Check]:
    if not home.is_dir():
        return [Check("home", "fail", f"{home} is not a folder",
                      "pass --home DIR (or set MDCRON_HOME) to the folder holding tasks/")]
    out = []
    tasks = home / "tasks"
    if not tasks.is_dir():
        out.append(Check("tasks folder", "fail", f"{tasks} does not exist",
                         f"mkdir {tasks} and put task files (*.md) in it"))
    else:
        out.append(Check("tasks folder", "ok", str(tasks)))
    out.append(_links(home))
    exposed = []
    for folder in (home / "state", home / "logs"):
        if not folder.exists() or folder.is_symlink():
            continue
        for root, dirs, files in os.walk(folder):
            for name in [*dirs, *files]:
                path = Path(root, name)
                try:
                    if not path.is_symlink() and not _private(path):
                        exposed.append(path)
                except OSError:
                    continue
            if not _private(Path(root)):
                exposed.append(Path(root))
    if exposed:
        shown = ", ".join(str(p) for p in sorted(set(exposed))[:5])
        more = f" and {len(set(exposed)) - 5} more" if len(set(exposed)) > 5 else ""
        out.append(Check("permissions", "fail",
                         f"readable by others (state and logs may hold output and history):"
                         f" {shown}{more}", f"chmod -R go-rwx {home / 'state'} {home / 'logs'}"))
    else:
        out.append(Check("permissions", "ok", "state/ and logs/ are readable by the owner only"))
    return out


def _config(home: Path, environ: Mapping[str, str]) -> tuple[Config | None, list[Check]]:
    path = home / CONFIG_NAME
    try:
        config, warnings = load_config(home, environ)
    except ConfigError as exc:
        errors = "; ".join(str(p) for p in exc.problems)
        return None, [Check("config", "fail", f"the tick stops on every run: {errors}",
                            f"fix {path} (`scheduler.py validate` lists the same problems)")]
    if not path.exists():
        return config, [Check("config", "ok", f"no {CONFIG_NAME}: defaults"),
                        Check("destinations", "warn", "no notification destination: failures"
                              " are only in the cron log",
                              f"add notify.destinations to {path} (see README, 'Alerts')")]
    notes = "; ".join(p.message for p in warnings)
    out = [Check("config", "warn" if warnings else "ok",
                 f"{path} loads" + (f" with warnings: {notes}" if notes else ""),
                 f"edit {path}" if warnings else "")]
    out.append(_destinations(config, warnings, environ))
    return config, out


def _destinations(config: Config, warnings: Sequence[Problem],
                  environ: Mapping[str, str]) -> Check:
    cfg = config.notify
    problems = [p for p in warnings if p.key and p.key.split(".")[0] in ("notify", "heartbeat_url")]
    if not cfg.destinations:
        return Check("destinations", "warn", "no notification destination: failures are only"
                     " in the cron log", "add notify.destinations to scheduler.yaml")
    bad = [p.message if not p.key else f"{p.key}: {p.message}" for p in problems]
    try:
        import apprise

        for name, template in sorted(cfg.destinations.items()):
            missing = [v for v in ENV_REF.findall(template) if v not in environ]
            if missing:
                continue  # reported by parse_notify_config as a warning already
            url = ENV_REF.sub(lambda m: environ[m.group(1)], template)
            if not apprise.Apprise().add(url):
                bad.append(f"notify.destinations.{name} ({scheme_of(template)}): apprise cannot"
                           " use this URL")
    except ImportError:
        bad.append("apprise is not installed: no alert can be sent")
    names = ", ".join(f"{k} ({scheme_of(v)})" for k, v in sorted(cfg.destinations.items()))
    if bad:
        return Check("destinations", "fail", "; ".join(bad),
                     "fix the URLs in scheduler.yaml and set their ${VARS} where cron runs the"
                     " tick (e.g. at the top of the crontab); test one with `apprise -vv URL`")
    return Check("destinations", "ok", f"{names}; default: {cfg.default or 'none'}")


def _crontab_or_daemon(home: Path, environ: Mapping[str, str], now: float) -> list[Check]:
    """The crontab line, and the daemon when one runs (or died): either one starting the
    ticks is enough."""
    from .daemon_lock import daemon_status

    crontab = _crontab(home, environ)
    found = daemon_status(home, now)
    if found is None:
        return [crontab]
    state, detail = found
    if state == "alive":
        if crontab.status != "ok":
            crontab = Check("crontab", "ok", "not needed: the daemon starts the ticks")
        return [Check("daemon", "ok", detail), crontab]
    fix = "start it again (`scheduler.py daemon`), or rely on the crontab line"
    return [Check("daemon", "warn" if crontab.status == "ok" else "fail", detail, fix), crontab]


def _crontab(home: Path, environ: Mapping[str, str]) -> Check:
    import shutil
    import subprocess

    from .crontab_line import line_for

    line = line_for(str(home), environ)
    binary = shutil.which("crontab", path=environ.get("PATH"))
    if binary is None:
        return Check("crontab", "warn", "no crontab command on PATH", f"install cron; then: {line}")
    try:
        listed = subprocess.run([binary, "-l"], capture_output=True, text=True, timeout=10,
                                env=dict(environ))
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("crontab", "warn", f"`crontab -l` failed: {exc}", f"add: {line}")
    return judge_crontab(listed.stdout, home, environ, line)


def judge_crontab(listing: str, home: Path, environ: Mapping[str, str], line: str) -> Check:
    """The crontab check from `crontab -l`'s text: each line read as the shell runs it (`cd`
    first), so a relative interpreter or --home is resolved where the line says."""
    from .crontab_line import parse

    cron_home = environ.get("HOME")
    ticks = [(s, t) for s in listing.splitlines() if (t := parse(s, cron_home)) is not None]
    here = [(s, t) for s, t in ticks
            if t.home is not None and os.path.realpath(t.home) == os.path.realpath(home)]
    if here:
        text, tick = here[0]
        old = _crontab_python(tick, environ)
        if old:
            return Check("crontab", "fail", f"{text.strip()}: {old}",
                         f"point the line at a Python 3.11 or newer that has mdcron's packages"
                         f" (the virtual environment's), e.g.: {line}")
        return _crontab_line_shape(text.strip(), tick, line)
    if ticks:
        return Check("crontab", "warn", f"a tick line for another folder: {ticks[0][0].strip()}",
                     f"add a line for this home (`scheduler.py install --cron` does): {line}")
    return Check("crontab", "fail", "no crontab line runs `scheduler.py tick` for this home",
                 f"`scheduler.py install --cron`, or `crontab -e` and add: {line}")


def _crontab_line_shape(text: str, tick: TickLine, line: str) -> Check:
    """Issue 25: what fails under cron although the interpreter is fine: a log redirect into a
    folder that does not exist (the shell gives up before the tick starts), and a tick line
    that does not run every minute (fires are late, or skipped past their catchup)."""
    from .crontab_line import every_minute

    folder = os.path.dirname(tick.log) if tick.log else None
    if folder and not os.path.isdir(folder):
        return Check("crontab", "fail", f"{text}: the folder of its log, {folder}, does not"
                     " exist, so cron's shell fails before the tick starts", f"mkdir -p {folder}")
    if not every_minute(tick.schedule):
        return Check("crontab", "warn", f"{text}: runs the tick at {tick.schedule!r}, not every"
                     " minute: tasks run late, and fires older than their catchup are skipped",
                     f"start the line with * * * * *, e.g.: {line}")
    return Check("crontab", "ok", text)


def _crontab_python(tick: TickLine, environ: Mapping[str, str]) -> str | None:
    """What is wrong with the interpreter the crontab line starts, or None."""
    from .crontab_line import resolve_python
    from .requirements import interpreter_problem

    if not tick.python:
        return None
    return interpreter_problem(resolve_python(tick, environ), tick.python, tick.cwd,
                               dict(environ))


def _api_key(found: TaskSet | None, environ: Mapping[str, str],
             daemon: bool = False) -> Check:
    """`daemon`: the ticks come from a running daemon (they get its environment), not cron."""
    if (environ.get("ANTHROPIC_API_KEY") or "").strip():
        return Check("api key", "ok", "ANTHROPIC_API_KEY is set (not shown)")
    claude = [t.id for t in found.tasks if t.run_as == "claude"] if found is not None else []
    fix = ("set ANTHROPIC_API_KEY in the daemon's environment and restart it (systemd:"
           " `Environment=`/`EnvironmentFile=` in its unit; docker: `-e ANTHROPIC_API_KEY`);"
           " its ticks inherit it" if daemon else
           "set ANTHROPIC_API_KEY=… at the top of the crontab (cron passes it to the tick)")
    if claude:
        return Check("api key", "fail", f"ANTHROPIC_API_KEY is not set: Claude tasks fail"
                     f" ({', '.join(claude)})", fix)
    return Check("api key", "warn", "ANTHROPIC_API_KEY is not set: no self-heal, comments stay"
                 " unread", fix)


def _tasks(found: TaskSet, tasks_dir: Path) -> Check:
    tasks, duplicates = found.tasks, found.duplicates
    problems = list(found.problems)
    if any(t.after for t in tasks):  # issue 22: a chain whose upstream is gone stops
        from ..schedule.chains import check_graph

        problems += check_graph(tasks, {t.id: t.enabled for t in tasks},
                                {t.id: t.path for t in tasks})[0]
    errors = [p for p in problems if p.severity == "error"]
    if duplicates:
        from ..tasks.id_lines import located  # lazy: only for a duplicated id

        ids = "; ".join(f"{task_id!r} in {located(paths)}"
                        for task_id, paths in sorted(duplicates.items()))
        return Check("task files", "fail", f"duplicate ids stop every tick: {ids}",
                     "rename one file's id (`scheduler.py validate` shows both files)")
    if errors:
        return Check("task files", "warn", f"{len(tasks)} valid, {len(errors)} with errors"
                     f" (skipped): {errors[0]}", "`scheduler.py validate` lists every problem")
    from ..tasks.not_tasks import ignored_folders  # lazy: issue 25, never silent

    if ignored := ignored_folders(tasks_dir):
        return Check("task files", "warn", f"{len(tasks)} valid task(s); {ignored[0]}",
                     "move the tasks up into tasks/ (only tasks/*.md are loaded)")
    return Check("task files", "ok", f"{len(tasks)} valid task(s)")


def _task_users(config: Config, found: TaskSet) -> Check:
    """Tasks running as root only because the tick does (issue 21), and a scheduler.yaml
    that the other users tasks run as could read."""
    from ..run.identity import implicit_root, other_users

    tasks = found.tasks
    rooted = implicit_root(tasks, config, os.geteuid())
    if rooted:
        shown = ", ".join(rooted[:5]) + (f" and {len(rooted) - 5} more" if len(rooted) > 5 else "")
        return Check("task users", "warn", f"{len(rooted)} task(s) run as root ({shown}): they"
                     " can read every secret of this host (scheduler.yaml, state/, the crontab,"
                     " the tick's environment)", "set run_user: in scheduler.yaml, or user: in"
                     " each task (README, 'Environment and secrets'); user: root to keep it")
    path = config.path
    if path is not None and not _private(path) and other_users(tasks, config,
                                                               path.stat().st_uid):
        return Check("task users", "warn", f"{path} is readable by other users, so by tasks"
                     " that run as another user (it may hold tokens)", f"chmod 600 {path}")
    return Check("task users", "ok", "no task runs as root by default")


def _held(home: Path) -> list[Check]:
    """Suspensions the state holds because the task file could not take them (issue 22)."""
    from ..schedule.held import PREFIX, describe

    path = home / "state" / "mdcron.db"
    try:
        db = read_only(path)
        try:
            rows = read_prefixed(db, PREFIX)
        finally:
            db.close()
    except sqlite3.Error:
        return []
    checks = []
    for key, value in sorted(rows.items()):
        task_id = key[len(PREFIX):]
        try:
            hold = json.loads(value)
        except ValueError:
            hold = {}
        checks.append(Check(f"task {task_id}", "warn", describe(hold, task_id),
                            f"fix the cause of its failures, then `scheduler.py enable {task_id}`"
                            " (and make its file writable again)"))
    return checks


def print_checks(checks: Sequence[Check]) -> None:
    """A check and its fix, each wrapped to a terminal's width under its status (issue 25: 80
    columns); one line each into a pipe or a file, for grep."""
    import textwrap  # lazy: only for the report

    from .fit import terminal_width

    width = terminal_width() if sys.stdout.isatty() else 1 << 20

    def say(text: str, indent: str) -> None:
        print(textwrap.fill(text, width, initial_indent=indent, subsequent_indent=" " * 5,
                            break_long_words=False, break_on_hyphens=False))

    for c in checks:
        say(f"{c.name}: {c.detail}", f"{c.status:4} ")
        if c.fix and c.status != "ok":
            head, sep, line = c.fix.partition("add: * ")  # a crontab line stays whole
            say(f"fix: {head}" + ("add (one line):" if sep else ""), " " * 5)
            if sep:
                print("* " + line)
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    print(f"{failed} problem(s), {warned} warning(s)")
