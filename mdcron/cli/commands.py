"""One function per command: call the core, print the result, return the exit status.

Lazy imports: each command imports the modules it needs inside its own function, so that a
command (and the tick, which cli/main.py reaches through here) loads only its own share of the
package: the tables (fit.py, tables.py), the tick and ladder for `tick` and `run`, chains,
incidents, comments, heal, doctor, install, the web server and the PostgreSQL copy for their
commands. What every command loads anyway (json, pathlib, dataclasses, store.py, clock.py) is
imported at the top.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from ..alerts.heartbeat import STALE_TICK
from ..core.clock import to_dt
from ..core.problems import Problem
from ..core.units import format_duration
from ..schedule.pause import end_maintenance, maintenance, start_maintenance
from ..settings.config import Config
from ..state.store import (
    Store,
    StoreError,
    database_lost,
    last_tick,
    lost_in_tick,
    state_store,
)
from ..state.trouble import describe, is_trouble
from .audit import record_cli
from .usage import OK, PROBLEM, USAGE, UsageError, clock_from, typed_clock


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
        report = run_tick(config, clock, dry_run=args.dry_run, say=say,
                          view=getattr(args, "warm_view", None))  # issue 27: held tick
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
            from ..alerts.after_run import tick_crashed

            tick_crashed(config, error, clock.now(), dict(os.environ), say)
        return PROBLEM
    if report.duplicates and not args.dry_run:
        from ..alerts.after_run import duplicate_ids  # imported here: not before a task starts

        duplicate_ids(config, report.duplicates, clock.now(), dict(os.environ), say)
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
    from .actions import resume_due

    marker = maintenance(str(config.home))
    if marker is not None:
        say(f"maintenance mode since {marker.get('since', '?')} (by {marker.get('by', '?')}):"
            " nothing runs; `scheduler.py resume` ends it")
        if not dry_run and config.db_path.exists():  # this host's tick (store.last_tick)
            with Store(config.db_path) as store:
                store.set_meta("last_tick", repr(now))
        return True
    if not dry_run:
        for line in resume_due(config, now):
            say(line)
    return False


def _load_task(config: Config, task_id: str):
    from .actions import load_task

    return load_task(config, task_id)


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from ..alerts.after_run import after_ladder, finish_tick
    from ..run.attempt import RunContext, current_owner
    from ..run.dispatch import describe_outcome
    from ..run.ladder import run_manual
    from ..run.tick import default_healer

    task = _load_task(config, args.id)
    if not getattr(args, "recorded", False):  # the web records its own "run now"
        record_cli(config, "run", task.id)
    clock = clock_from(None)
    ctx = RunContext(config, clock, current_owner(), dict(os.environ))
    with state_store(config) as store:
        healer = default_healer(config, ctx.environ, store, clock)
        no_chain = getattr(args, "no_chain", False)
        run_id, outcome = run_manual(ctx, store, task, healer,
                                     trigger="manual-no-chain" if no_chain else "manual")
        # the same ladder, alerts and incidents as a scheduled run
        after_ladder(store, config, outcome, clock.now(), ctx.environ, print)
        print(f"run {run_id}: " + describe_outcome(outcome), flush=True)  # before its chain
        if outcome.final.log_path:
            print(f"log: {outcome.final.log_path}", flush=True)
        if outcome.final.ok and not no_chain:  # issue 12: its chain runs now, in order
            from ..schedule.chains import run_chain_after_manual

            run_chain_after_manual(ctx, store, healer, print, started_by=run_id)
        from ..run.pings import wait_all  # lazy: as the ladder; issue 26: ping_url

        wait_all(print)  # the task's pings, each within its deadline
        finish_tick(store, config, clock.now(), not outcome.final.ok, ctx.environ, print,
                    ctx.failed_destinations)
    return OK if outcome.final.ok else PROBLEM


def cmd_list(config: Config, args: argparse.Namespace) -> int:
    from .fit import terminal_width
    from .queries import list_rows
    from .render import print_json
    from .tables import list_lines

    now = typed_clock(args.now, "--now", config.timezone, "the config's zone")[0].now()
    loaded = _listing(config)
    if args.tag and not any(args.tag in t.tags for t in loaded.tasks):
        from .ids import unknown_tag

        raise UsageError(unknown_tag(args.tag, loaded.tasks))
    rows = list_rows(config, loaded, now, args.tag)
    if args.json:
        print_json(rows)
        return OK
    width = terminal_width()
    for note in _notes(config, rows, now, loaded.tasks):
        _say_note(f"mdcron: {note}", width)
    from ..tasks.not_tasks import list_notes  # issue 25: README.md, sub-folders: said once

    for note in list_notes(loaded.problems, config.tasks_dir):
        _say_note(note, width)
    if not rows:
        print(f"no task files in {config.tasks_dir}")
        return OK
    valid = sum(r["valid"] for r in rows)
    print(_title(f"{valid} task(s)", f" in {config.tasks_dir}",
                 f", times in {display_zone(config)}", width))
    for line in list_lines(rows, loaded.problems if args.tag is None else [], config.tasks_dir,
                           now, _zone(config), width, args.wide,
                           bool(config.state_url)):
        print(line)
    return OK


def _listing(config: Config):  # -> queries.Loaded
    """queries.load_all for `list` (issue 27: 10,000 tasks): the tasks' cached fields
    (View.records), the state rows as tuples and each last run's three shown columns."""
    from ..schedule.cache import load
    from ..schedule.held import held
    from .queries import Loaded

    view = load(config)
    tasks = view.records()
    states: dict = {}
    last: dict = {}
    holds: dict = {}
    if config.state_exists:
        with state_store(config) as store:
            states, last, holds = store.state_rows(), store.last_run_briefs(), held(store)
            view.fill_dues(states)  # once after a config change, then cached
            view.save(store)
    view.close()
    return Loaded(tasks, view.problems, states, last, view.due_hints(states), holds)


def _say_note(text: str, width: int) -> None:
    """A note on stderr, wrapped for a terminal (one line into a pipe or a log)."""
    if sys.stderr.isatty():
        import textwrap  # lazy: only for a terminal

        text = textwrap.fill(text, width, subsequent_indent="  ", break_long_words=False)
    print(text, file=sys.stderr)


def _title(head: str, where: str, zone: str, width: int) -> str:
    """A table's title line, the folder left out when the line would not fit."""
    return head + where + zone if len(head + where + zone) <= width else head + zone


def _zone(config: Config):
    from ..core.cron import resolve_zone

    return resolve_zone(config.timezone)


def display_zone(config: Config) -> str:
    """The zone absolute times are shown in: the config's, else the machine's."""
    from ..core.cron import resolve_zone

    return config.timezone or str(resolve_zone(None))


def _notes(config: Config, rows: list[dict], now: float, tasks: list | None = None) -> list[str]:
    """Plain warnings for `list`: cron has stopped calling the tick; Claude has no key."""
    notes = []
    if config.state_exists:
        with state_store(config) as store:
            last = last_tick(config, store)
        if last is not None and now - float(last) > STALE_TICK:
            notes.append(f"the last tick ran {format_duration(now - float(last))} ago: is the"
                         " crontab line still there? (see README, 'Two commands')")
    if config.state_url:  # issue 11: copies that differ; tasks whose hosts all stopped
        from ..hosts.files import describe, differing, orphaned
        from ..schedule.cache import load_task_set

        with state_store(config) as store:
            notes.extend(describe(t, hosts) for t, hosts in differing(store).items())
            notes.extend(orphaned(store, load_task_set(config).tasks))
    notes.extend(_claude_notes(config, tasks))
    return notes


def _claude_notes(config: Config, tasks: list | None = None) -> list[str]:
    """`tasks`: the ones already loaded (list's, through the cache), else every file read."""
    from ..schedule.cache import load_task_set

    if os.environ.get("ANTHROPIC_API_KEY"):
        return []
    if tasks is None:
        tasks = load_task_set(config).tasks
    claude = [t.id for t in tasks if t.run_as == "claude"]
    if claude:
        return [f"ANTHROPIC_API_KEY is not set: Claude tasks ({', '.join(claude)}) will fail,"
                " self-heal is off and comments stay unread"]
    return []


NO_KEY_HEAL = ("ANTHROPIC_API_KEY is not set: failures are not healed (set it where the tick"
               " runs; `doctor` says how)")


def _history_json(row: dict) -> dict:
    from .queries import iso

    out = {k: v for k, v in row.items() if k not in ("owner_pid", "owner_start", "owner_boot")}
    for key in ("scheduled_for", "started_at", "finished_at"):
        out[key] = iso(row[key])  # type: ignore[arg-type]
    out["run_id"] = row["id"]
    out["note"] = _note(row) or None  # e.g. "self-heal not attempted: ..."
    try:  # issue 25: an object, not JSON inside a string
        out["extra"] = json.loads(row["extra"]) if row.get("extra") else None
    except (TypeError, ValueError):
        pass  # not JSON: kept as the text it is
    return out


def cmd_history(config: Config, args: argparse.Namespace) -> int:
    from .fit import terminal_width
    from .render import print_json
    from .tables import history_lines

    rows: list[dict] = []
    if config.state_exists:
        with state_store(config) as store:
            rows = store.history(args.n, args.task)
    if args.task and not rows:
        _load_task(config, args.task)  # an unknown id: the one message (ids.py), exit 2
    if args.json:
        print_json([_history_json(r) for r in rows])
        return OK
    if not rows:
        print(f"no runs of {args.task} recorded yet" if args.task else "no runs recorded yet")
        return OK
    now = clock_from(None).now()
    print(f"recent runs, newest first, times in {display_zone(config)}")
    for line in history_lines(rows, now, _zone(config), terminal_width(), args.wide,
                              bool(config.state_url), _error_text):
        print(line)
    return OK


def _error_text(row: dict) -> str:
    """The error column; a heal row shows its diagnosis; a note (why no heal) follows."""
    if row.get("kind") == "heal" and row.get("extra"):
        try:
            return "heal: " + str(json.loads(str(row["extra"])).get("diagnosis", ""))[:300]
        except ValueError:
            pass
    return "; ".join(t for t in (str(row.get("error") or ""), _note(row)) if t)


def _note(row: dict) -> str:
    try:
        extra = json.loads(str(row.get("extra") or "{}"))
    except ValueError:
        return ""
    return str(extra.get("note") or "") if isinstance(extra, dict) else ""


def _jitter_of(task: object, config: Config) -> float:
    """A task's jitter offset in seconds (0 for a bare schedule)."""
    from ..tasks.run_keys import start_offset  # lazy: only for `next`
    from ..tasks.task import Task  # lazy: only for `next`

    return start_offset(task, config) if isinstance(task, Task) else 0.0


def cmd_next(config: Config, args: argparse.Namespace) -> int:
    from ..core.cron import ScheduleError, parse_schedule, resolve_zone
    from ..schedule.cache import find_task, load_task_set
    from .render import print_json

    task = next(iter(find_task(config, args.target).tasks), None)  # issue 27: via the cache
    if task is not None and task.after:  # issue 12: "after extract" + the upstream's next fire
        from ..schedule.chains import next_lines

        tasks = load_task_set(config).tasks
        for line in next_lines(config, task, tasks, clock_from(None).now()):
            print(line)
        return OK
    try:
        shown = resolve_zone(args.tz) if args.tz else None
    except ScheduleError:
        from ..core.zones import unknown_zone

        raise UsageError(f"--tz: {unknown_zone(args.tz)}") from None
    try:  # a task fires in its own zone; --tz only converts what is shown (issue 25)
        zone = resolve_zone((task.timezone if task else args.tz) or config.timezone)
        expression = task.schedule if task else args.target
        schedule = parse_schedule(expression, zone)
    except (ScheduleError, ValueError) as exc:
        if task is None and len(args.target.split()) == 1 and not args.target.startswith("@"):
            from .ids import unknown_id  # lazy: only for an id nobody knows

            ids = (t.id for t in load_task_set(config).tasks)  # every id: a did-you-mean
            raise UsageError(unknown_id(args.target, ids, config.tasks_dir)
                             + "; or quote a schedule like '0 6 * * 1-5'") from None
        message = f"{args.target!r} is neither a task id nor a valid schedule: {exc}"
        raise UsageError(message) from exc
    shown = shown or zone
    whose = "the --tz zone" if args.tz else "the config's zone"
    clock, read_as = typed_clock(args.after, "--after", args.tz or config.timezone, whose)
    if read_as:
        print(f"mdcron: {read_as}", file=sys.stderr)
    after = clock.anchor if args.after else clock.now_dt()
    fires = []
    t = after
    for _ in range(max(0, args.n)):
        nxt = schedule.next_after(t)
        if nxt is None:
            break
        fires.append(nxt.astimezone(shown))
        t = nxt
    from datetime import timedelta  # lazy: only for `next`

    offset = timedelta(seconds=_jitter_of(task, config))  # issue 26: the fire + its jitter
    if args.json:
        print_json([(f + offset).isoformat() for f in fires])
    else:
        from .timefmt import relative  # lazy: only for `next`

        ref = clock_from(None).now()  # "in 4 min" is from the real now, as `list` says it
        for f in fires:
            start = f" → starts {f + offset:%H:%M:%S} (jitter)" if offset else ""
            print(f.strftime("%Y-%m-%d %H:%M %Z (%a)") + start
                  + f"  ({relative((f + offset).timestamp(), ref)})")
        if not fires:
            print("no further fire times")
    return OK


def cmd_validate(config: Config, args: argparse.Namespace, warnings: list[Problem]) -> int:
    from ..run.environment import bypasses_claude_isolation
    from ..schedule.cache import load_task_set

    if args.files:  # issue 25: a pre-commit hook's staged files only
        from .validate_files import file_problems

        count, problems = file_problems(config, args.files)
        return _print_problems(problems, count, args.json)
    found = load_task_set(config)
    tasks = found.tasks
    from ..tasks.not_tasks import ignored_folders

    problems = list(warnings) + found.problems + ignored_folders(config.tasks_dir)
    from ..tasks.id_lines import id_line, located

    for task_id, paths in found.duplicates.items():
        for path in paths:
            others = located(p for p in paths if p != path)
            problems.append(Problem(path, f"duplicate id {task_id!r} (also in {others}): the"
                                    " tick refuses to run anything until one is renamed", key="id",
                                    line=id_line(path)))
    if any(t.after for t in tasks):  # issue 12: unknown upstreams, cycles (every file named)
        from ..schedule.chains import check_graph

        problems += check_graph(tasks, {t.id: t.enabled for t in tasks},
                                {t.id: t.path for t in tasks})[0]
    for task in tasks:
        if task.command and (warning := bypasses_claude_isolation(task.command)):
            problems.append(Problem(task.path, warning, key="command", severity="warning"))
    for note in _claude_notes(config):
        problems.append(Problem(config.tasks_dir, note, severity="warning"))
    from .validation import past_at  # issue 25: an @at that will never run

    problems += past_at(config, tasks, clock_from(None).now())
    from ..claude.templates import template_problems

    problems += template_problems(config)
    return _print_problems(problems, len(tasks), args.json)


def _print_problems(problems: list[Problem], tasks: int, as_json: bool) -> int:
    from .render import print_json

    errors = [p for p in problems if p.severity == "error"]
    if as_json:
        print_json({"tasks": tasks, "errors": len(errors),
                    "problems": [p.to_json() for p in problems]})
    else:
        for p in problems:
            print(p, file=sys.stderr if p.severity == "error" else sys.stdout)
        print(f"{tasks} valid task(s), {len(errors)} error(s),"
              f" {len(problems) - len(errors)} warning(s)")
    return PROBLEM if errors else OK


def cmd_why(config: Config, args: argparse.Namespace) -> int:
    from .queries import explain, outside_lines

    task = _load_task(config, args.id)
    clock, read_as = typed_clock(args.at, "--at", task.timezone or config.timezone,
                                 "the task's zone" if task.timezone else "the config's zone")
    at = clock.now()
    if read_as:
        print(read_as)
    state = None
    if config.state_exists:
        with state_store(config) as store:
            state = store.task_state(task.id)
    for line in [*explain(config, task, state, at), *outside_lines(task)]:
        print(_wrapped(line))
    return OK


def _wrapped(line: str) -> str:
    """A line of prose wrapped to a terminal's width (kept whole into a pipe, for grep)."""
    if not sys.stdout.isatty():
        return line
    import textwrap  # lazy: only for a terminal

    from .fit import terminal_width

    return textwrap.fill(line, terminal_width(), subsequent_indent="  ",
                         break_long_words=False, break_on_hyphens=False)


def cmd_show(config: Config, args: argparse.Namespace) -> int:
    from .render import print_json
    from .show import show_json, show_lines

    task = _load_task(config, args.id)
    now = clock_from(None).now()
    runs: list[dict] = []
    heals: list[dict] = []
    state = None
    hold = None
    if config.state_exists:
        from ..schedule.held import held

        with state_store(config) as store:
            runs = store.history(10, task.id)
            state = store.task_state(task.id)
            hold = held(store).get(task.id)  # issue 22: a suspension its file could not take
            from ..selfheal.healer import heal_history

            heals = heal_history(store, task.id, 3)
    if args.json:
        print_json(show_json(task, state, hold, runs, heals, now, config, _history_json))
        return OK
    from ..core.cron import resolve_zone
    from .fit import terminal_width
    from .queries import zone_name
    from .run_policy import show_lines as policy_rows  # issue 26: retries, jitter, overlap

    no_key = task.self_heal and not (os.environ.get("ANTHROPIC_API_KEY") or "").strip()
    notes = [*policy_rows(config, task),
             # said here, not on every failure row (issue 25)
             *([("self-heal", f"off: {NO_KEY_HEAL}")] if no_key else [])]
    lines = show_lines(task, config, resolve_zone(zone_name(task, config)),
                       zone_name(task, config), state, runs, now, _error_text,
                       terminal_width() if sys.stdout.isatty() else 0, tuple(notes))
    if hold is not None:
        from ..schedule.held import describe

        lines.insert(3, f"{'suspended':12}{describe(hold, task.id)}")
    for line in lines:
        print(line)
    if sys.stdout.isatty():
        from .show import print_body  # lazy: rich's Markdown, only in a terminal

        print_body(task)
    from .timefmt import absolute

    for heal in heals:
        print(f"\nheal #{heal['id']} ({heal['outcome']}, {absolute(heal['created_at'])}):"
              f" {heal.get('diagnosis') or ''}")
        if heal.get("diff"):
            print(heal["diff"])
    return OK


def cmd_logs(config: Config, args: argparse.Namespace) -> int:
    from .logs import show_log

    if args.run is None and not _has_runs(config, args.id):
        _load_task(config, args.id)  # an unknown id: the one message (ids.py), exit 2
    task = None
    if getattr(args, "follow", False):
        from ..schedule.cache import load_task_set

        task = load_task_set(config).get(args.id)  # its timeout bounds the follow
    timeout = task.timeout if task is not None else 600.0
    return show_log(config, args.id, args.run, getattr(args, "follow", False), timeout)


def _has_runs(config: Config, task_id: str) -> bool:
    """A task removed from tasks/ keeps its history: its id is still known to logs/history."""
    if not config.state_exists:
        return False
    with state_store(config) as store:
        return bool(store.history(1, task_id))


def _set_enabled(config: Config, task_id: str, enabled: bool, reason: str | None,
                 until: float | None = None) -> int:
    from .actions import set_enabled

    task = set_enabled(config, task_id, enabled, reason, clock_from(None).now(), until)
    state = "enabled" if enabled else f"disabled ({reason})"
    if until is not None:
        state += f" until {to_dt(until).isoformat(timespec='minutes')}"
    record_cli(config, "enable" if enabled else "disable", task.id, state)
    print(f"{task.id}: {state} in {task.path}")
    return OK


def cmd_enable(config: Config, args: argparse.Namespace) -> int:
    return _set_enabled(config, args.id, True, None)


def cmd_disable(config: Config, args: argparse.Namespace) -> int:
    if args.until is None:
        return _set_enabled(config, args.id, False, args.reason)
    clock, read_as = typed_clock(args.until, "--until", config.timezone, "the config's zone")
    until = clock.now()
    if read_as:
        print(f"mdcron: {read_as}", file=sys.stderr)  # a pause that ends by itself (pause.py)
    return _set_enabled(config, args.id, False, "paused", until)


def cmd_pause(config: Config, args: argparse.Namespace) -> int:
    """Maintenance mode: every tick runs nothing until `resume`."""
    by = args.by or os.environ.get("USER") or "someone"
    start_maintenance(str(config.home), to_dt(clock_from(None).now()).isoformat(), by)
    record_cli(config, "maintenance-on", detail=f"by {by}")
    print("maintenance mode: the tick runs nothing until `scheduler.py resume`")
    return OK


def cmd_resume(config: Config, args: argparse.Namespace) -> int:
    ended = end_maintenance(str(config.home))
    if ended:
        record_cli(config, "maintenance-off")
    print("maintenance mode ended: the tick runs tasks again" if ended
          else "not in maintenance mode")
    return OK


def cmd_web(home, args: argparse.Namespace) -> int:  # home: Path (the page shows a broken config)
    from ..web.server import serve

    # issue 24: a missing or mistyped home is refused, never created (the page would say
    # "Tasks run normally" about an empty folder)
    if not home.is_dir() or not any((home / n).exists() for n in ("tasks", "scheduler.yaml",
                                                                   "state")):
        what = "does not exist" if not home.exists() else (
            "is not a folder" if not home.is_dir() else
            "has no tasks/ folder, scheduler.yaml or state/: it is not an mdcron home")
        print(f"mdcron: --home {home} {what}. Give the folder that holds tasks/ (e.g. --home"
              f" ~/mdcron, or set MDCRON_HOME), or create it first: mkdir -p {home}/tasks",
              file=sys.stderr)
        return 2

    return serve(home, args.host, args.port, args.token_file, args.allow_host or [],
                 args.metrics_listen, revoke=args.revoke_sessions)


__all__ = ["USAGE"]


def cmd_incidents(config: Config, args: argparse.Namespace) -> int:
    from ..alerts.incidents import incident_json, incident_title, list_incidents
    from .render import print_json, short_time, table

    rows: list[dict] = []
    if config.state_exists:
        with state_store(config) as store:
            rows = list_incidents(store, include_resolved=args.all)
    if args.json:
        print_json([incident_json(r) for r in rows])
        return OK
    if not rows:
        print("no open incidents" if not args.all else "no incidents recorded")
        return OK
    table("incidents", ["#", "status", "task", "kind", "opened", "last seen", "count", "title"],
          [(r["id"], r["status"], r["task_id"], r["kind"], short_time(r["opened_at"]),
            short_time(r["last_seen"]), r["count"], incident_title(r)) for r in rows])
    return OK


def cmd_resolve(config: Config, args: argparse.Namespace) -> int:
    from ..alerts.incidents import resolve

    with state_store(config) as store:
        done = resolve(store, args.incident, clock_from(None).now(), "resolved by hand")
    if not done:
        print(f"mdcron: no open incident #{args.incident} (see `incidents`)", file=sys.stderr)
        return PROBLEM
    record_cli(config, "resolve", detail=f"incident #{args.incident}")
    print(f"incident #{args.incident} resolved")
    return OK


def cmd_comment(config: Config, args: argparse.Namespace) -> int:
    from ..claude.comments import add_comment

    task = _load_task(config, args.id)
    author = args.author or os.environ.get("USER") or "someone"
    with state_store(config) as store:
        comment_id = add_comment(store, task.id, author, args.text, clock_from(None).now())
    record_cli(config, "comment", task.id, f"#{comment_id} as {author}")
    print(f"comment #{comment_id} on {task.id} stored; Claude reads it before the next run")
    return OK


def cmd_comments(config: Config, args: argparse.Namespace) -> int:
    from ..claude.comments import thread
    from .render import print_json, short_time

    rows: list[dict] = []
    if config.state_exists:
        with state_store(config) as store:
            rows = thread(store, args.id)
    if args.json:
        from .queries import iso

        print_json([{**r, "created_at": iso(r["created_at"]),  # type: ignore[arg-type]
                     "read_at": iso(r["read_at"])} for r in rows])  # type: ignore[arg-type]
        return OK
    if not rows:
        _load_task(config, args.id)  # an unknown id: the one message (ids.py), exit 2
        print(f"no comments on {args.id}")
    for r in rows:
        print(f"#{r['id']} {short_time(r['created_at'])} {r['author']}: {r['body']}")
        if r.get("read_at"):
            action = f" [{r['action']}]" if r.get("action") else ""
            print(f"    mdcron{action}: {r.get('reply') or ''}")
        else:
            print("    (unread)")
    return OK


def cmd_revert_heal(config: Config, args: argparse.Namespace) -> int:
    from ..selfheal.healer import RevertError, revert_heal

    task = _load_task(config, args.id)
    try:
        with state_store(config) as store:
            restored = revert_heal(config, store, task.id, now=clock_from(None).now(),
                                   force=args.force)
    except RevertError as exc:
        print(f"mdcron: {exc}", file=sys.stderr)
        return PROBLEM
    record_cli(config, "revert-heal", task.id, "forced" if args.force else None)
    for path in restored:
        print(f"restored {path}")
    return OK


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
