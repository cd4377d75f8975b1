"""The command line's grammar: one argparse parser per command, built only for the command used
(issue 27: the ~24 subparsers cost a tick ~10 ms). cron's own `tick` line never comes here
(main.tick_words reads it without argparse)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path


def _count(high: int):  # -> an argparse type: a whole number from 1 to high
    def count(text: str) -> int:
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
