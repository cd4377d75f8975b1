"""The commands that change something by hand: `enable`, `disable` (`--until`), `pause` and
`resume` (maintenance mode), `resolve` an incident, `comment`, `revert-heal`; and the lists
they act on (`incidents`, `comments`). Each one is recorded in the audit (cli/audit.py).

Lazy imports: each command imports what it needs inside its own function (incidents, comments,
the healer), so that one command loads only its share.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..core.clock import to_dt
from ..schedule.pause import end_maintenance, start_maintenance
from ..settings.config import Config
from ..state.store import state_store
from .actions import load_task as _load_task
from .audit import record_cli
from .usage import OK, PROBLEM, clock_from, typed_clock


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
