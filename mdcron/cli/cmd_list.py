"""`list` and `history`: the table of every task and the table of recent runs, with the notes
said above them (the tick has stopped, no API key for Claude tasks, copies that differ between
hosts), and a run row as `history --json` and `show --json` give it.

Lazy imports: each command imports what it needs inside its own function (the tables, the cache
loader, the hosts' checks), so that `history` never loads what `list` needs.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys

from ..core.units import format_duration
from ..settings.config import Config
from ..state.store import last_tick, state_store
from .history_rows import history_json as _history_json
from .history_rows import run_note as _note
from .usage import OK, PROBLEM, UsageError, clock_from, typed_clock


def _load_task(config: Config, task_id: str):
    from .actions import load_task

    return load_task(config, task_id)


def cmd_list(config: Config, args: argparse.Namespace) -> int:
    gc.disable()  # issue 27: 10,000 tasks' rows hold no cycles; the collector's passes over
    try:  # them cost `list` a fifth of its time
        return _list(config, args)
    finally:
        gc.enable()


def _list(config: Config, args: argparse.Namespace) -> int:
    now = typed_clock(args.now, "--now", config.timezone, "the config's zone")[0].now()
    if args.json and not args.tag:  # issue 27: most rows written as text (list_json.py)
        from .render import print_items

        print_items(_json_items(config, now))
        return OK
    from .fit import terminal_width
    from .queries import list_rows, task_rows
    from .render import print_json
    from .tables import table_cells, table_lines

    loaded = _listing(config)
    if args.tag and not any(args.tag in t.tags for t in loaded.tasks):
        from .ids import unknown_tag

        raise UsageError(unknown_tag(args.tag, loaded.tasks))
    if args.json:
        print_json(list_rows(config, loaded, now, args.tag))
        return OK
    width = terminal_width()
    for note in _notes(config, now, loaded.tasks):
        _say_note(f"mdcron: {note}", width)
    from ..tasks.not_tasks import list_notes  # issue 25: README.md, sub-folders: said once

    for note in list_notes(loaded.problems, config.tasks_dir):
        _say_note(note, width)
    folder = [p for p in loaded.problems if p.path == config.tasks_dir]
    for problem in folder:  # e.g. tasks/ is a file: never a quiet "0 task(s)"
        _say_note(f"mdcron: {problem}", width)
    if folder:
        return PROBLEM
    # the table's cells straight from what list_rows' rows are made of (tables.table_cells)
    tasks = [t for t in loaded.tasks if not args.tag or args.tag in t.tags]
    cells = table_cells(task_rows(config, loaded, now).facts, tasks, config, now,
                        _zone(config), bool(config.state_url))
    invalid = loaded.problems if args.tag is None else []  # list_rows: files in error
    if not cells and not any(p.severity == "error" for p in invalid):
        print(f"no task files in {config.tasks_dir}")
        return OK
    print(_title(f"{len(cells)} task(s)", f" in {config.tasks_dir}",
                 f", times in {display_zone(config)}", width))
    lines = table_lines(cells, invalid, config.tasks_dir, width, args.wide)
    if lines:  # one write, not a print per line (issue 27: 10,000 lines)
        sys.stdout.write("\n".join(lines) + "\n")
    return OK


def _listing(config: Config):  # -> queries.Loaded
    """queries.load_all for `list` (issue 27: 10,000 tasks): the tasks' listed fields
    (schedule/listing.py), the state rows as tuples and each last run's three shown columns."""
    from ..schedule.cache import load
    from ..schedule.listing import listed

    view = load(config)
    tasks = listed(view)
    return _with_state(config, view, tasks, [t.id for t in tasks])


def _with_state(config: Config, view, tasks: list, ids: list[str]):  # -> queries.Loaded
    """The view's tasks with their state rows, holds and last runs (closes the view)."""
    from ..schedule.held import held
    from .queries import Loaded

    states: dict = {}
    last: dict = {}
    holds: dict = {}
    dues: dict = {}
    if config.state_exists:
        with state_store(config) as store:
            states, holds = store.state_rows(), held(store)
            last = store.last_run_briefs(ids)
            dues = view.fill_dues(states)  # once after a config change, then cached
            view.save(store)
    view.close()
    return Loaded(tasks, view.problems, states, last, dues, holds)


def _json_items(config: Config, now: float) -> list[str]:
    """`list --json`'s rows as text: the plain ones from the cache's listings (list_json.py),
    the others as list_rows makes them."""
    items, scan, cached = _lean_items(config, now)
    if items is not None:
        return items
    import sqlite3

    from ..schedule.cache import load
    from ..schedule.listing import listed
    from ..state.task_cache import listings, split_listed
    from .list_json import json_items, prepare
    from .render import item_encoder

    # the rows' scan and cache rows with their listings, not read a second time
    cache_rows, texts = split_listed(cached) if cached is not None else (None, None)
    view = load(config, scan=scan, rows=cache_rows)
    rows: dict[str, str | None] = {}
    if view.db is not None and sum(e.task is None for e in view.valid) > 50:
        try:
            rows = texts if texts is not None else listings(view.db)
        except sqlite3.Error:
            rows = {}
    if not rows:  # no cache to write rows from: every task as list_rows has it
        tasks = listed(view)
        loaded = _with_state(config, view, tasks, [t.id for t in tasks])
        from .queries import list_rows

        return list(map(item_encoder(), list_rows(config, loaded, now, None)))
    prepared = prepare(view, rows)
    loaded = _with_state(config, view, [], [e.id for e, _ in prepared])
    return json_items(config, view, rows, prepared, loaded, now, item_encoder())


def _lean_items(config: Config, now: float
                ) -> tuple[list[str] | None, tuple[int, dict] | None, dict | None]:
    """The rows when every file's cache row holds (schedule/cache_listed.py), without a View
    or an Entry (issue 27: ~20 ms at 10,000 tasks); None when a file, a row or a due hint
    needs the View (it reads, computes and saves), with the folder's scan and the cache rows
    when they were read (load() takes them: a file changed costs no second read of either)."""
    from ..schedule.cache_listed import WholeRows, due_hints, held_rows, read_rows
    from ..schedule.held import held
    from ..state.idle import take_scan
    from .list_json import lean_items
    from .render import item_encoder

    if not config.state_exists:
        return None, None, None
    try:
        scan = take_scan(str(config.tasks_dir))
    except OSError:
        return None, None, None
    cached = read_rows(config)
    rows = None if cached is None else held_rows(scan[1], cached)
    if rows is None:
        return None, scan, cached
    with state_store(config) as store:  # as _with_state reads them
        states, holds = store.state_rows(), held(store)
        last = store.last_run_briefs([r.id for r in rows])
    dues = due_hints(rows, states)
    if dues is None:
        return None, scan, cached
    whole = WholeRows(config)
    try:
        return lean_items(config, rows, states, last, dues, holds, now, item_encoder(),
                          whole), scan, None
    finally:
        whole.close()


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


def _notes(config: Config, now: float, tasks: list | None = None) -> list[str]:
    """Plain warnings for `list`: cron has stopped calling the tick; Claude has no key."""
    notes = []
    if config.state_exists:
        with state_store(config) as store:
            last = last_tick(config, store)
        from ..alerts.heartbeat import STALE_TICK  # lazy: only `list` (show/next load this module)

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
