"""Commands: parse arguments, call one core function, print, return an exit code.

Exit status: 0 fine, 1 the command found a problem, 2 usage or configuration error.

Cron starts `tick` every minute and most ticks have nothing to do, so `tick` first tries the
idle fast path (state/idle.py: stdlib only, no argparse); everything else is imported when needed.

Lazy imports: the idle tick loads only this module, state/idle.py and their few stdlib modules
(datetime and time are loaded anyway). pathlib, argparse, the command modules (commands, config,
store, usage, doctor) and what they pull in (re, json, core/records, ...: ~20 ms of imports) are
imported inside the functions, once the fast path has declined; argparse only for a command
line other than a plain tick (tick_words: cron's own line is read without it).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime

from ..run.procguard import become_subreaper, make_undumpable
from ..state import idle as fastpath
from .pipes import guard_std_streams

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping, Sequence
    from pathlib import Path




def default_home() -> Path:
    """$MDCRON_HOME, else the folder holding scheduler.py (the package's parent)."""
    from pathlib import Path

    env = os.environ.get("MDCRON_HOME")
    return Path(env) if env else Path(__file__).resolve().parents[2]


def _count(high: int):  # -> an argparse type: a whole number from 1 to high
    def count(text: str) -> int:
        import argparse  # lazy: only while parsing arguments (argparse is loaded then)

        try:
            value = int(text)
        except ValueError:
            value = 0
        if not 1 <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {high}, "
                                             f"got {text!r}")
        return value

    return count


class _Unbuilt:
    """Stands for the parser of a command this run does not use (build_parser's `only`)."""

    def add_argument(self, *args: object, **kwargs: object) -> None:
        pass

    def add_mutually_exclusive_group(self, *args: object, **kwargs: object) -> _Unbuilt:
        return self


def command_word(argv: Sequence[str]) -> str | None:
    """The command argv names (`--home DIR` may come first); None when unclear or asking for
    help (then every command's parser is built, for the listing and the error)."""
    words = iter(argv)
    for word in words:
        if word in ("-h", "--help"):
            return None
        if word == "--home":
            next(words, None)
        elif not word.startswith("-"):
            return None if any(w in ("-h", "--help") for w in words) else word
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """`only`: build just that command's parser (issue 27: ~24 subparsers cost a tick ~10 ms);
    an unknown name builds them all, so argparse lists the choices in its error."""
    import argparse
    from pathlib import Path

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", type=Path, default=argparse.SUPPRESS,
                        help="folder with tasks/, logs/, state/ (env MDCRON_HOME)")
    p = argparse.ArgumentParser(prog="scheduler.py", parents=[common],
                                description="mdcron: a cron scheduler driven by Markdown files.")
    sub = p.add_subparsers(dest="command", required=True, metavar="command",
                           help="`scheduler.py COMMAND --help` describes each")

    known = ("tick", "run", "list", "history", "next", "validate", "why", "show", "logs",
             "enable", "disable", "pause", "resume", "web", "incidents", "resolve", "comment",
             "comments", "doctor", "state", "daemon", "install", "uninstall", "revert-heal")
    if only not in known:
        only = None

    def cmd(name: str, help: str) -> argparse.ArgumentParser:
        if only is not None and name != only:
            return _Unbuilt()  # type: ignore[return-value]
        return sub.add_parser(name, parents=[common], help=help, description=help)

    c = cmd("tick", "one pass: run every task that is due now")
    c.add_argument("--now", help="evaluate as if it were this ISO-8601 instant")
    c.add_argument("--dry-run", action="store_true", help="print what would run; change nothing")
    c.add_argument("--exit-zero", action="store_true",
                   help="exit 0 when a task failed (cron mails a non-zero exit); 2 still means"
                        " the scheduler itself has a problem")
    c.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="json: one object per line (ts, tick, level, event, task, message)")
    c = cmd("run", "run a task now, regardless of its schedule")
    c.add_argument("id", help="the task's id (see `list`)")
    c.add_argument("--no-chain", action="store_true",
                   help="do not start the tasks that run after this one")
    c.add_argument("--recorded", action="store_true", help=argparse.SUPPRESS)  # web's audit
    c = cmd("list", "tasks with schedule, state, last and next run")
    c.add_argument("--tag", help="only the tasks with this tag")
    c.add_argument("--json", action="store_true", help="every field as JSON, times in ISO-8601")
    c.add_argument("--wide", action="store_true",
                   help="every column, uncut (default: the columns that fit the terminal)")
    c.add_argument("--now", help=argparse.SUPPRESS)
    c = cmd("history", "the most recent runs")
    c.add_argument("-n", type=_count(100_000), default=20, metavar="N",
                   help="how many runs, 1-100000 (default 20)")
    c.add_argument("--task", metavar="ID", help="only the runs of this task")
    c.add_argument("--json", action="store_true", help="the runs as JSON, times in ISO-8601")
    c.add_argument("--wide", action="store_true",
                   help="every column, uncut (default: the columns that fit the terminal)")
    c = cmd("next", "the next fire times of a task or a cron expression")
    c.add_argument("target", help="a task id or a quoted schedule like '0 6 * * 1-5'")
    c.add_argument("-n", type=_count(1000), default=5, metavar="N",
                   help="how many fire times, 1-1000 (default 5)")
    c.add_argument("--after", help="ISO-8601 instant to start from (default: now)")
    c.add_argument("--tz", help="IANA zone for an expression (default: the config's)")
    c.add_argument("--json", action="store_true", help="the fire times as JSON (ISO-8601)")
    c = cmd("validate", "check every task file and the config, or only the FILEs given"
            " (a pre-commit hook); exit 1 on any error")
    c.add_argument("files", nargs="*", metavar="FILE",
                   help="task files to check (default: every file in tasks/ and the config)")
    c.add_argument("--json", action="store_true", help="the problems as JSON")
    c = cmd("why", "explain whether a task is due at an instant, and why")
    c.add_argument("id", help="the task's id (see `list`)")
    c.add_argument("--at", help="ISO-8601 instant (default: now)")
    c = cmd("show", "a task's settings, state and recent runs")
    c.add_argument("id", help="the task's id (see `list`)")
    c.add_argument("--json", action="store_true",
                   help="task, state and runs as JSON, times in ISO-8601")
    c = cmd("logs", "print the output log of a task's latest run (or run N)")
    c.add_argument("id", help="the task's id (see `list`)")
    c.add_argument("--run", type=_count(2**62), metavar="N", help="run number (see history)")
    c.add_argument("--follow", "-f", action="store_true",
                   help="a running run: print its output as it comes, until it ends")
    c = cmd("enable", "enable a task (edits its file)")
    c.add_argument("id", help="the task's id (see `list`)")
    c = cmd("disable", "disable a task (edits its file)")
    c.add_argument("id", help="the task's id (see `list`)")
    c.add_argument("--reason", default="by_choice", help="why, kept in the file (default"
                   " by_choice)",
                   choices=["by_choice", "paused", "retired", "auto_suspended"])
    c.add_argument("--until", help="ISO-8601 instant: a pause that ends by itself (the tick"
                   " enables the task again then)")
    c = cmd("pause", "maintenance mode: the tick runs nothing until `resume`")
    c.add_argument("--by", help="who paused (default: $USER)")
    cmd("resume", "end maintenance mode")
    c = cmd("web", "serve the dashboard (Mission Control) on http://HOST:PORT")
    c.add_argument("--host", default="127.0.0.1", help="address to listen on (default"
                   " 127.0.0.1: this machine only)")
    c.add_argument("--port", type=_count(65535), default=8765,
                   help="port to listen on (default 8765)")
    c.add_argument("--token-file", type=Path, help="access token file (default:"
                   " state/web-token, created 0600); required for a non-loopback --host")
    c.add_argument("--allow-host", action="append", metavar="NAME",
                   help="another Host header name to accept (a reverse proxy's)")
    c.add_argument("--metrics-listen", metavar="HOST:PORT", help="also serve /metrics"
                   " for Prometheus there, without the token (e.g. 127.0.0.1:9108)")
    c.add_argument("--revoke-sessions", action="store_true", help="log every browser out of"
                   " this home's dashboards (a running server too) and exit")
    c = cmd("incidents", "open incidents (suspensions, timeouts, crashed ticks, duplicate ids)")
    c.add_argument("--all", action="store_true", help="include resolved ones")
    c.add_argument("--json", action="store_true", help="the incidents as JSON")
    c = cmd("resolve", "resolve an incident by hand")
    c.add_argument("incident", type=_count(2**62), help="the incident's number (see"
                   " `incidents`)")
    c = cmd("comment", "leave a comment on a task; Claude reads it before the next run")
    c.add_argument("id", help="the task's id (see `list`)")
    c.add_argument("text", help="the comment, quoted")
    c.add_argument("--author", help="default: $USER")
    c = cmd("comments", "a task's comments and the scheduler's replies")
    c.add_argument("id", help="the task's id (see `list`)")
    c.add_argument("--json", action="store_true", help="the comments as JSON")
    c = cmd("doctor", "check the home: permissions, database, crontab line, config,"
            " destinations, API key; print each problem with its fix")
    c.add_argument("--json", action="store_true", help="the checks as JSON")
    c = cmd("state", "state copy --to postgresql://…: copy this home's SQLite state to an"
            " empty PostgreSQL database (several hosts)")
    c.add_argument("action", choices=("copy",), help="copy: this home's state to --to")
    target = c.add_mutually_exclusive_group(required=True)
    target.add_argument("--to", metavar="URL", help="postgresql://user:pw@host/db; ${VAR}s are"
                        " expanded (single-quote them: a password in argv is visible to `ps`)")
    target.add_argument("--to-file", metavar="FILE", help="read the URL from FILE (keeps the"
                        " password out of `ps`)")
    c.add_argument("--schema", metavar="NAME", help="put mdcron's tables in this schema (created"
                   " if missing) of a database that holds other tables")
    c = cmd("daemon", "run a tick at the start of every minute, in the foreground (no cron"
            " needed: containers); SIGTERM stops it")
    c.add_argument("--log-format", choices=["text", "json"], default="text",
                   help="json: one object per line, as `tick --log-format json`")
    c = cmd("install", "add the tick to this user's crontab, or write systemd units")
    how = c.add_mutually_exclusive_group(required=True)
    how.add_argument("--cron", action="store_true", help="a crontab line (through `crontab`)")
    how.add_argument("--systemd", action="store_true", help="systemd units")
    c.add_argument("--user", action="store_true", help="systemd: user units (~/.config)")
    c.add_argument("--timer", action="store_true",
                   help="systemd: a .timer starting the tick each minute instead of the daemon")
    c.add_argument("--print", action="store_true", help="show what it would write; change nothing")
    c.add_argument("--exit-zero", action="store_true", help="cron: the line's tick exits 0 when"
                   " a task failed (no mail from cron); kept by later installs")
    c = cmd("uninstall", "remove exactly what `install` added")
    how = c.add_mutually_exclusive_group(required=True)
    how.add_argument("--cron", action="store_true", help="the crontab line `install` added")
    how.add_argument("--systemd", action="store_true", help="the systemd units")
    c.add_argument("--user", action="store_true", help="systemd: user units (~/.config)")
    c = cmd("audit", "who did what: actions from the dashboard and the CLI, newest first")
    c.add_argument("--task", metavar="ID", help="only this task's")
    c.add_argument("-n", type=_count(100_000), default=30, metavar="N",
                   help="how many actions, 1-100000 (default 30)")
    c.add_argument("--json", action="store_true", help="the actions as JSON")
    c = cmd("completion", "print a shell completion script (commands, options, task ids):"
            ' eval "$(python3 scheduler.py completion bash)" in ~/.bashrc')
    c.add_argument("shell", choices=("bash", "zsh"), help="the shell to complete for")
    c = cmd("revert-heal", "restore the files the task's last self-heal changed")
    c.add_argument("id", help="the task's id (see `list`)")
    c.add_argument("--force", action="store_true", help="even if they changed since")
    return p


def main(argv: Sequence[str] | None = None, *,
         above: Mapping[str, Callable[[Path, argparse.Namespace], int]] | None = None) -> int:
    """`above`: the handlers of commands whose layer sits above cli/ (`web`: web/server.cmd_web),
    joined by the entry point (scheduler.py), since cli/ never imports web/. Each is called as
    handler(home, args), before the config is loaded."""
    make_undumpable()  # tasks of the same user cannot read our secrets in /proc/<pid>/environ
    guard_std_streams()  # a reader gone early (`| head`) ends output quietly, not the command
    argv = sys.argv[1:] if argv is None else list(argv)
    ahead = None
    if "--warm-fd" in argv:  # issue 27: the daemon's tick, started ahead of its minute
        from . import warm  # lazy: only the daemon's held tick

        argv, fd = warm.split_warm_fd(argv)
        if fd is not None:
            ahead = warm.Ahead(_home_arg(argv), fd, _now_arg(argv))
            if ahead.idle:  # stay small; at the minute, the idle path as cron's tick
                held = ahead.wait()
                if held is not None:
                    return held
                ahead = None
    idle = _idle_tick(argv) if ahead is None else None
    if idle is not None:
        return idle
    if ahead is None:
        fastpath.pin_seen_code()  # the code the idle check read: one read per tick
    from . import requirements  # lazy: only once the idle tick declined (stdlib only)

    if absent := requirements.missing():  # issue 25: one line naming the Python to use
        code_dir = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        print(requirements.stop_line(absent, code_dir), file=sys.stderr)
        return 2
    from pathlib import Path

    from ..settings.config import ConfigError
    from ..state.store import StoreError
    from . import commands
    from .usage import USAGE, UsageError

    words = tick_words(argv)
    args = (TickArgs(*words) if words is not None  # type: ignore[arg-type]
            else build_parser(command_word(argv)).parse_args(argv))
    home = Path(getattr(args, "home", None) or default_home()).resolve()
    if args.command == "completion":  # no config needed: the script reads tasks/ itself
        from .completion import bash_script, zsh_script

        script = bash_script if args.shell == "bash" else zsh_script
        print(script(build_parser(), home), end="")
        return 0
    joined = above or {}
    handler = joined.get(args.command) or getattr(
        commands, "cmd_" + args.command.replace("-", "_"), None)
    if handler is None:  # `web` from a caller that did not join web/ (main() called directly)
        print(f"mdcron: `{args.command}` is started through scheduler.py", file=sys.stderr)
        return USAGE
    if args.command == "doctor" or args.command in joined:  # before load_config: they report
        return handler(home, args)  # a broken config themselves
    text = fastpath.config_text(str(home))  # before load_config: the cache key is these bytes
    from . import config_data  # lazy: with the config (a flat one is read without yaml)

    try:
        # every command keeps the key of a text both parsers read alike (issue 27: a `list`
        # after a config change paid PyYAML until the next tick); a dry run changes nothing
        config, warnings = config_data.load(home, text,
                                            keep=not getattr(args, "dry_run", False))
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"mdcron: {problem}", file=sys.stderr)
        print("mdcron: fix the config file; nothing was run.", file=sys.stderr)
        if args.command == "tick" and not args.dry_run:
            from .emergency import config_error_alert

            for line in config_error_alert(home, exc.problems, dict(os.environ),
                                           _alert_now(args)):
                print(f"mdcron: {line}", file=sys.stderr)
        return USAGE
    fastpath.note_config(config, text)
    if args.command in ("tick", "run"):  # issue 21: orphaned task processes come back to us
        become_subreaper()
    if ahead is not None:  # warmed up to here: wait for the minute, refuse what changed
        held = ahead.warm_and_wait(config, text)
        if held is not None:
            return held
        args.warm_view = ahead.view  # cmd_tick runs on it (stat'ed again at the go)
        args.warm_store = ahead.store  # the database opened ahead (None: opened at the go)
    if args.command == "validate":
        return handler(config, args, warnings)
    try:
        return handler(config, args)
    except StoreError as exc:
        told = []
        if args.command == "tick" and not args.dry_run:
            from .emergency import store_error_alert

            told = store_error_alert(config, str(exc), dict(os.environ), _alert_now(args))
        # one line: the file, the cause, the fix, and who was told
        stopped = "the tick stopped: " if args.command == "tick" else ""
        print(f"mdcron: {stopped}{exc}" + (f" ({'; '.join(told)})" if told else ""),
              file=sys.stderr)
        return USAGE
    except UsageError as exc:
        print(f"mdcron: {exc}", file=sys.stderr)
        return USAGE
    except Exception as exc:  # issue 22: a database in trouble under any command: one line
        from ..state.trouble import describe, is_trouble

        if not is_trouble(exc):
            raise
        print(f"mdcron: {describe(config.db_path, exc)}", file=sys.stderr)
        return USAGE


def _home_arg(argv: list[str]) -> str:
    """The home `--home DIR` names (the daemon spells it so), else the default one."""
    for i, arg in enumerate(argv):
        if arg.startswith("--home="):
            return os.path.realpath(arg.partition("=")[2])
        if arg == "--home" and i + 1 < len(argv):
            return os.path.realpath(argv[i + 1])
    return os.path.realpath(os.environ.get("MDCRON_HOME") or os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))


def _now_arg(argv: list[str]) -> float | None:
    """The instant `--now ISO` names (with its offset), else None."""
    for i, arg in enumerate(argv):
        text = arg.partition("=")[2] if arg.startswith("--now=") else (
            argv[i + 1] if arg == "--now" and i + 1 < len(argv) else None)
        if text is not None:
            try:
                instant = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
            except ValueError:
                return None
            return instant.timestamp() if instant.utcoffset() is not None else None
    return None


def _alert_now(args: argparse.Namespace) -> float:
    """The instant of an alert sent before the tick ran: its --now, as the tick's would be."""
    from .usage import UsageError, clock_from

    try:
        return clock_from(getattr(args, "now", None)).now()
    except UsageError:
        return clock_from(None).now()


class TickArgs:
    """The arguments of a plain `tick` argv (tick_words), as argparse would give them: a tick
    spelled so needs no argparse (issue 27: the parser, gettext, locale and shutil cost the
    first task ~5 ms)."""

    command = "tick"
    log_format = "text"

    def __init__(self, home: str | None, now: str | None, dry_run: bool, exit_zero: bool):
        if home is not None:
            from pathlib import Path  # lazy: loaded by then (settings/config.py)

            self.home = Path(home)
        self.now, self.dry_run, self.exit_zero = now, dry_run, exit_zero


def tick_words(argv: list[str]) -> tuple[str | None, str | None, bool, bool] | None:
    """(home, now, dry_run, exit_zero) for `[--home DIR] tick [--home DIR] [--now ISO]
    [--dry-run] [--exit-zero]`, each at most once and spelled exactly so; None for anything
    else (argparse then parses and reports it as always)."""
    if "tick" not in argv:
        return None
    home = when = None
    dry_run = exit_zero = seen_tick = False
    rest = iter(argv)
    for arg in rest:
        name, eq, value = arg.partition("=")
        if arg == "tick" and not seen_tick:
            seen_tick = True
        elif arg == "--dry-run" and seen_tick and not dry_run:
            dry_run = True
        elif arg == "--exit-zero" and seen_tick and not exit_zero:
            exit_zero = True
        elif name in ("--home", "--now"):
            value = value if eq else next(rest, "")
            if not value or value.startswith("-") or (name == "--now" and not seen_tick):
                return None
            if name == "--home":
                if home is not None:
                    return None
                home = value
            elif when is not None:
                return None
            else:
                when = value
        else:
            return None
    if not seen_tick:
        return None
    return home, when, dry_run, exit_zero


def _idle_tick(argv: list[str]) -> int | None:
    """A plain `tick` (tick_words) through fastpath.idle_tick. None for anything else and
    whenever the tick may have work: then the full tick runs."""
    words = tick_words(argv)
    if words is None:
        return None
    home, when, dry_run, exit_zero = words
    started = time.monotonic()
    if when is None:
        now = time.time()
    else:  # as clock.parse_instant, but a naive instant (local zone) takes the full path
        try:
            instant = datetime.fromisoformat(when.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if instant.utcoffset() is None:
            return None
        from ..core.limits import EARLIEST, LATEST  # stdlib only; the full path says why not

        if not EARLIEST <= instant < LATEST:
            return None
        now = instant.timestamp()
    if home is None:
        home = os.environ.get("MDCRON_HOME") or os.path.dirname(
            os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    from ..schedule.pause import idle_blocked  # stdlib only: two os.path.exists

    try:
        code = fastpath.idle_tick(os.path.realpath(home), now, dry_run, started,
                                  blocked=idle_blocked, ping=_ping)
    except Exception:  # anything unexpected: the full tick decides, and reports
        return None
    return 0 if code == 1 and exit_zero else code  # as cmd_tick's --exit-zero


def _ping(url: str, failed: bool, environ: Mapping[str, str]) -> str | None:
    """The idle tick's heartbeat (alerts/heartbeat.py), loaded only when one is configured."""
    from ..alerts.heartbeat import ping  # lazy: stdlib only, and only with a heartbeat_url

    return ping(url, failed, environ)


__all__ = ["main"]
