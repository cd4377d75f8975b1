"""One function per command: call the core, print the result, return the exit status.

Here: `tick`, `run`, `daemon`, `install`/`uninstall`, `doctor`, `state`, `audit` (`web`'s is
web/server.cmd_web, joined to the CLI by scheduler.py: cli/ never imports web/). The
other groups have their own modules, loaded only for their commands (__getattr__ below): `list`
and `history` (cmd_list.py), one task's (`show`, `next`, `why`, `logs`, `validate`:
cmd_task.py), the changes by hand (`enable`, `disable`, `pause`, `resume`, incidents,
comments, `revert-heal`: cmd_edit.py).

Lazy imports: each command imports the modules it needs inside its own function, so that a
command (and the tick, which cli/main.py reaches through here) loads only its own share of the
package: the tables (fit.py, tables.py), the tick and ladder for `tick` and `run`, chains,
incidents, comments, heal, doctor, install and the PostgreSQL copy for their
commands. What every command loads anyway (json, pathlib, core/records.py, store.py, clock.py) is
imported at the top.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..core import collector
from ..core.clock import to_dt
from ..schedule.pause import maintenance, pauses
from ..settings.config import Config
from ..state.store import (
    Store,
    StoreError,
    database_lost,
    lost_in_tick,
    state_store,
)
from ..state.trouble import describe, is_trouble
from .usage import OK, PROBLEM, USAGE, UsageError, clock_from, typed_clock

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:  # a plain tick is parsed without argparse (main.TickArgs)
    import argparse

    from ..core.clock import Clock
    from ..run.heal_protocol import Healer, Settled


def cmd_tick(config: Config, args: argparse.Namespace) -> int:
    from ..run.tick import run_tick
    from ..run.tick_log_size import keep_small
    from ..run.ticklog import TickLog

    clock, read_as = typed_clock(args.now, "--now", config.timezone, "the config's zone")
    rotated = None if args.dry_run else keep_small(config.home)  # before any line is written
    say = TickLog(fmt=getattr(args, "log_format", "text"))  # every line: time, tick id
    if rotated:
        say(rotated)
    if read_as:
        say(read_as)

    if _paused_tick(config, clock.now(), args.dry_run, say):
        return OK
    try:
        report = run_tick(config, clock, dry_run=args.dry_run, say=say,  # issue 27: held tick
                          view=getattr(args, "warm_view", None),
                          store=getattr(args, "warm_store", None), selfheal=SELF_HEAL)
    except StoreError:
        raise  # a clear message and exit 2 from main(); the database cannot hold an alert
    except Exception as exc:
        if database_lost(exc):  # issue 23: PostgreSQL went away mid-tick, not a crash
            raise lost_in_tick(exc) from None
        if is_trouble(exc):  # the file, its disk or its lock, not a bug: main()'s one line
            raise StoreError(describe(config.db_path, exc)) from None
        import traceback

        error = traceback.format_exc()
        say.error(f"mdcron: tick crashed, tasks are not running:\n{error}")
        if not args.dry_run:
            from .emergency import tick_crashed

            tick_crashed(config, error, clock.now(), dict(os.environ), say)
        return PROBLEM
    finally:
        collector.release()  # a tick that started no task (core/collector.py)
    if report.duplicates and not args.dry_run:
        from ..alerts.after_run import duplicate_ids  # imported here: not before a task starts
        from ..run.incident_command import run_incident_command

        duplicate_ids(config, report.duplicates, clock.now(), dict(os.environ), say,
                      incident_runner=run_incident_command)
    if report.problems_changed and not report.problems_said:  # run_tick said them if it ran
        from ..run.tick import problem_lines

        for line in problem_lines(config, report.problems):
            say.error(line)
    if report.duplicates:
        from ..tasks.id_lines import located  # issue 25: both files, at their id line

        for task_id, paths in report.duplicates.items():
            files = located(paths)
            say.error(f"mdcron: duplicate id {task_id!r} in {files}: nothing runs until one is"
                      " renamed")
        return report.exit_code
    when = to_dt(report.now).isoformat(timespec="seconds")
    if args.dry_run:  # for a person at a terminal, plain (and as fastpath's idle dry run)
        for p in report.planned:
            verb = "would run" if p.action == "run" else "would skip"
            print(f"{p.task.id}: {verb} slot {to_dt(p.slot).isoformat()} ({p.reason})")
        if not report.planned:
            print(f"{when}: nothing due among {report.tasks} task(s)")
        return OK
    # skips, lost claims and each run's outcome were said by run_tick as they happened
    if getattr(args, "exit_zero", False):
        return OK if report.exit_code == 1 else report.exit_code
    return report.exit_code


def _paused_tick(config: Config, now: float, dry_run: bool, say) -> bool:
    """Maintenance mode (True: nothing runs, the tick says so) and timed pauses that are over
    (enabled again before the pass, so their next slot runs). pause.py."""
    marker = maintenance(str(config.home))
    if marker is not None:
        say(f"maintenance mode since {marker.get('since', '?')} (by {marker.get('by', '?')}):"
            " nothing runs; `scheduler.py resume` ends it")
        if not dry_run and config.db_path.exists():  # this host's tick (store.last_tick)
            with Store(config.db_path) as store:
                store.set_meta("last_tick", repr(now))
        return True
    if not dry_run and any(p["until"] <= now for p in pauses(str(config.home)).values()):
        from .actions import resume_due  # lazy: only with a pause that is over (issue 27)

        for line in resume_due(config, now):
            say(line)
    return False


def _load_task(config: Config, task_id: str):
    from .actions import load_task

    return load_task(config, task_id)


class ClaudeSelfHeal:
    """The self-heal layer lent to the tick and to `run` (run/heal_protocol.SelfHeal): made here,
    above both, because selfheal/ sits above run/ and run/ never imports it."""

    def healer(self, config: Config, environ: dict[str, str], store: Store,
               clock: Clock) -> Healer | None:
        """Claude heals when a key is set; else no healer (the consecutive-failure rule). The
        key is looked at before anything of Claude's is imported."""
        if not (environ.get("ANTHROPIC_API_KEY") or "").strip():
            return None
        from ..selfheal.healer import ClaudeHealer

        return ClaudeHealer(config, environ, store, clock)

    def settle_unfinished(self, config: Config, store: Store, now: float) -> list[Settled]:
        """Called only with a journal left behind: then self-heal loads."""
        from ..selfheal.unfinished import settle_unfinished

        return settle_unfinished(config, store, now)


SELF_HEAL = ClaudeSelfHeal()


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from ..alerts.after_run import after_ladder, finish_tick
    from ..run.attempt import RunContext, current_owner
    from ..run.dispatch import describe_outcome
    from ..run.incident_command import run_incident_command
    from ..run.ladder import run_manual

    task = _load_task(config, args.id)
    if not getattr(args, "recorded", False):  # the web records its own "run now"
        from .audit import record_cli  # lazy: off the tick's path (issue 27)

        record_cli(config, "run", task.id)
    clock = clock_from(None)
    ctx = RunContext(config, clock, current_owner(), dict(os.environ))
    with state_store(config) as store:
        healer = SELF_HEAL.healer(config, ctx.environ, store, clock)
        no_chain = getattr(args, "no_chain", False)
        run_id, outcome = run_manual(ctx, store, task, healer,
                                     trigger="manual-no-chain" if no_chain else "manual")
        # the same ladder, alerts and incidents as a scheduled run
        after_ladder(store, config, outcome, clock.now(), ctx.environ, print,
                     incident_runner=run_incident_command)
        print(f"run {run_id}: " + describe_outcome(outcome), flush=True)  # before its chain
        if outcome.final.log_path:
            print(f"log: {outcome.final.log_path}", flush=True)
        if outcome.final.ok and not no_chain:  # issue 12: its chain runs now, in order
            from ..run.chain_rounds import run_chain_after_manual

            run_chain_after_manual(ctx, store, healer, print, started_by=run_id)
        from ..run.pings import wait_all  # lazy: as the ladder; issue 26: ping_url

        wait_all(print)  # the task's pings, each within its deadline
        finish_tick(store, config, clock.now(), not outcome.final.ok, ctx.environ, print,
                    ctx.failed_destinations)
    return OK if outcome.final.ok else PROBLEM


__all__ = ["USAGE"]


def cmd_audit(config: Config, args: argparse.Namespace) -> int:
    """Who did what: the dashboard's and the CLI's actions, newest first (issue 24)."""
    from .audit import print_audit

    print_audit(config, args.task, args.n, args.json)
    return OK


def cmd_doctor(home, args: argparse.Namespace) -> int:  # home: Path (no Config: it may not load)
    """Check the home and print what is wrong with the fix for each; exit 1 on any failure."""
    from .doctor import print_checks, run_doctor
    from .render import print_json

    checks = run_doctor(home, dict(os.environ), clock_from(None).now())
    if args.json:
        print_json([c.to_json() for c in checks])
    else:
        print_checks(checks)
    return PROBLEM if any(c.status == "fail" for c in checks) else OK


def cmd_state(config: Config, args: argparse.Namespace) -> int:
    """`state copy --to URL` (issue 11): SQLite history into a new PostgreSQL state."""
    from ..settings.state_url import StateUrlError, literal_password, mask, parse
    from ..state.copy import CopyError, copy_state, with_schema

    given = args.to
    if args.to_file is not None:
        try:
            given = Path(args.to_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--to-file {args.to_file}: cannot read it ({exc})") from None
    elif literal_password(given):  # issue 23: `ps` shows argv to every user of the machine
        print("mdcron: warning: the password is on the command line, where `ps` shows it to"
              " other users; next time put the URL in a file (--to-file FILE) or write"
              " --to 'postgresql://user:${PGPASSWORD}@host/db' in single quotes",
              file=sys.stderr)
    option = "--to-file" if args.to_file is not None else "--to"
    try:
        url = parse(given, os.environ)
    except StateUrlError as exc:
        raise UsageError(f"{option}: {exc}") from None
    try:
        if args.schema:
            url = with_schema(url, args.schema)
        counts = copy_state(config.db_path, url, config.host_name, args.schema)
    except CopyError as exc:
        print(f"mdcron: {exc}; nothing was copied", file=sys.stderr)
        return USAGE
    done = ", ".join(f"{n} {table}" for table, n in counts.items())
    print(f"copied {done} from {config.db_path} to {mask(url)}")
    print(f"next: set state_url: {mask(url)} in scheduler.yaml (or $MDCRON_STATE_URL) on every"
          " host; this file is left as it was")
    return OK


def cmd_daemon(config: Config, args: argparse.Namespace) -> int:
    from .daemon import run_daemon

    return run_daemon(config.home, config.stop_grace, config.kill_grace, args.log_format)


def cmd_install(config: Config, args: argparse.Namespace) -> int:
    import subprocess  # lazy: only install/uninstall (crontab), not show/next/history

    from .install import InstallError, install_cron, install_systemd, systemd_units, unit_dir

    try:
        if args.cron:
            print(install_cron(config.home, os.environ, args.print,
                               getattr(args, "exit_zero", False)))
        else:
            units = systemd_units(config.home, os.environ, args.user, args.timer,
                                  config.stop_grace, config.kill_grace)
            print(install_systemd(units, unit_dir(args.user, os.environ), args.user, args.print))
    except (InstallError, OSError, subprocess.SubprocessError) as exc:
        print(f"mdcron: {exc}", file=sys.stderr)
        return PROBLEM
    return OK


def cmd_uninstall(config: Config, args: argparse.Namespace) -> int:
    import subprocess  # lazy: only install/uninstall (crontab), not show/next/history

    from .install import InstallError, uninstall_cron, uninstall_systemd, unit_dir

    try:
        if args.cron:
            print(uninstall_cron(config.home, os.environ))
        else:
            print(uninstall_systemd(config.home, unit_dir(args.user, os.environ), args.user))
    except (InstallError, OSError, subprocess.SubprocessError) as exc:
        print(f"mdcron: {exc}", file=sys.stderr)
        return PROBLEM
    return OK


# The other commands, each group in its own module, loaded when main() asks for its handler
# (PEP 562): the tick never loads them.
_MOVED = {
    "cmd_list": "cmd_list", "cmd_history": "cmd_list", "display_zone": "cmd_list",
    "_error_text": "cmd_list",
    "NO_KEY_HEAL": "cmd_list",
    "cmd_show": "cmd_task", "cmd_next": "cmd_task", "cmd_why": "cmd_task",
    "cmd_logs": "cmd_task", "cmd_validate": "cmd_task",
    "cmd_enable": "cmd_edit", "cmd_disable": "cmd_edit", "cmd_pause": "cmd_edit",
    "cmd_resume": "cmd_edit", "cmd_incidents": "cmd_edit", "cmd_resolve": "cmd_edit",
    "cmd_comment": "cmd_edit", "cmd_comments": "cmd_edit", "cmd_revert_heal": "cmd_edit",
}


def __getattr__(name: str) -> object:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # lazy: only for a command of another group

    return getattr(importlib.import_module(f"{__package__}.{module}"), name)
