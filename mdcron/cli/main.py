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

from ..core import collector
from ..run.procguard import become_subreaper, make_undumpable
from ..state import cache_key as keys
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
        keys.pin_seen_code()  # the code the idle check read: one read per tick
        if fastpath.due_seen:  # a task is due: its cgroup join kept quick from here (issue 27)
            _keep_joins_quick()
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
    if words is not None:
        args = TickArgs(*words)
    else:
        from .parser import build_parser, command_word  # lazy: argparse, not for cron's line

        args = build_parser(command_word(argv)).parse_args(argv)
    if args.command != "tick":  # only a tick waits for its first task (core/collector.py)
        collector.release()
    home = Path(getattr(args, "home", None) or default_home()).resolve()
    if args.command == "completion":  # no config needed: the script reads tasks/ itself
        from .completion import bash_script, zsh_script

        script = bash_script if args.shell == "bash" else zsh_script
        from .parser import build_parser  # lazy: argparse (completion is never a tick)

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
    text = keys.config_text(str(home))  # before load_config: the cache key is these bytes
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
    keys.note_config(config, text)
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


def _keep_joins_quick() -> None:
    """The keeper's first migration waits out the kernel's grace period (~6-13 ms, measured in
    a tick): started in run_tick, after the tick's imports, it was still under way when the
    run's cgroup was made (mkdir waits for it: 0-9 ms before the task started). Started here,
    as the idle check declines for a due task, it is over long before."""
    from ..run.cgroup_keep import KEEP_S, keep_joins_quick  # lazy: a tick with a due task only

    keep_joins_quick(KEEP_S)


def _ping(url: str, failed: bool, environ: Mapping[str, str]) -> str | None:
    """The idle tick's heartbeat (alerts/heartbeat.py), loaded only when one is configured."""
    from ..alerts.heartbeat import ping  # lazy: stdlib only, and only with a heartbeat_url

    return ping(url, failed, environ)


__all__ = ["main"]
