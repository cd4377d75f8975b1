"""The commands about one task or the task files: `show`, `next`, `why`, `logs` and `validate`.

Lazy imports: each command imports what it needs inside its own function (cron maths, chains,
the heal history, rich's Markdown for a terminal), so that one command loads only its share.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..core.problems import Problem
from ..settings.config import Config
from ..state.store import state_store
from .actions import load_task as _load_task
from .actions import refuse_duplicate
from .cmd_list import NO_KEY_HEAL, _claude_notes, _error_text, _history_json
from .usage import OK, PROBLEM, UsageError, clock_from, typed_clock


def _jitter_of(task: object, config: Config) -> float:
    """A task's jitter offset in seconds (0 for a bare schedule)."""
    from ..tasks.run_keys import start_offset  # lazy: only for `next`
    from ..tasks.task import Task  # lazy: only for `next`

    return start_offset(task, config) if isinstance(task, Task) else 0.0


def cmd_next(config: Config, args: argparse.Namespace) -> int:
    from ..core.cron import ScheduleError, parse_schedule, resolve_zone
    from ..schedule.cache import find_task, load_task_set

    found = find_task(config, args.target)  # issue 27: via the cache, this task decoded
    refuse_duplicate(found.duplicates, args.target)
    task = next(iter(found.tasks), None)
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
        from .render import print_json  # lazy: only --json

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
            heals = store.heal_history(task.id, 3)  # not via selfheal.healer: ~40 ms of imports
    if args.json:
        from .render import print_json  # lazy: only --json

        print_json(show_json(task, state, hold, runs, heals, now, config, _history_json))
        return OK
    from ..core.cron import resolve_zone
    from .fit import terminal_width
    from .run_policy import show_lines as policy_rows  # issue 26: retries, jitter, overlap
    from .task_text import zone_name

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
