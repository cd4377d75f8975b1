"""Chains: `schedule: after extract` (or `after: [a, b]` with `schedule: after`).

One upstream: every successful upstream slot gives exactly one downstream run, for the same slot
(history lines up; the unique (task, slot) claim makes it exactly once). An upstream slot that
ended failed / timed out / crashed / skipped gives a downstream `skipped` row saying so
("upstream extract failed at 06:00"). Several upstreams: the downstream runs once all of them
have succeeded for slots within one `chain_window` (default a day, in the task's zone), once per
window, for the latest of those slots.

Eligibility is read from recorded run rows on every tick (pending_for), never from an in-memory
event, so a tick that dies between an upstream's success and its downstream's start strands
nothing: the next tick finds the success row. A downstream whose previous run still runs, here
or on another host (issue 23), is not claimed but waits, owed, within its chain window
(hold_back); a claim that loses the race for its lock or lease is given back (ladder.not_now).
The tick starts downstreams right after its own runs (run/chain_rounds.py: run_rounds), round
after round, so a chain a → b → c completes within one tick.
The queries sit in small functions so that a later state interface can take them over.

Lazy imports: the lock's holder only for a chained task; difflib only for a did-you-mean.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Iterable
from datetime import datetime, tzinfo
from pathlib import Path

from ..core.clock import to_dt
from ..core.problems import Problem
from ..core.records import dataclass
from ..state.store import Store, TaskState, state_store
from ..tasks.task import Task

MAX_ROUNDS = 64  # a chain deeper than this finishes in the next tick
FINAL = ("success", "failed", "timeout", "crashed", "lost", "skipped")


# --------------------------------------------------------------- validation (pure)


def check_graph(tasks: Iterable[Task], enabled: dict[str, bool],
                paths: dict[str, Path] | None = None) -> tuple[list[Problem], set[str]]:
    """Cross-file checks of chains: unknown upstreams and cycles (errors; every file of a cycle
    is named), a disabled upstream (warning). Returns the problems and the ids that must not
    run. `enabled`: every valid task id -> enabled; `paths`: id -> file (for messages)."""
    import difflib

    chained = [t for t in tasks if t.after]
    paths = dict(paths or {})
    paths.update({t.id: t.path for t in chained})
    problems: list[Problem] = []
    broken: set[str] = set()
    for t in chained:
        for up in t.after:
            if up not in enabled:
                near = difflib.get_close_matches(up, sorted(enabled), n=1, cutoff=0.6)
                hint = f"did you mean {near[0]!r}?" if near else "no task file has that id"
                problems.append(Problem(t.path, f"after: unknown upstream task {up!r}; {hint}",
                                        key="schedule"))
                broken.add(t.id)
            elif not enabled[up]:
                where = f" ({paths[up].name})" if up in paths else ""
                problems.append(Problem(
                    t.path, f"after: upstream {up!r}{where} is disabled; {t.id} waits until it"
                    " is enabled and succeeds", key="schedule", severity="warning"))
    graph = {t.id: set(t.after) for t in chained}
    while True:
        try:
            graphlib.TopologicalSorter(graph).prepare()
            break
        except graphlib.CycleError as exc:
            cycle: list[str] = list(exc.args[1])  # [a, b, ..., a]
            files = ", ".join(paths[n].name if n in paths else n for n in cycle[:-1])
            text = " → ".join(reversed(cycle))
            for node in dict.fromkeys(cycle):
                if node in paths:
                    problems.append(Problem(paths[node], f"after: chain cycle {text} (files:"
                                            f" {files}); a chain must end: remove one after",
                                            key="schedule"))
                broken.add(node)
            for node in cycle:
                graph.pop(node, None)
    return problems, broken


# --------------------------------------------------------------- eligibility


@dataclass(frozen=True, slots=True)
class UpSlot:
    """How one upstream slot ended, from its rows (run, retries; heals do not count)."""

    task_id: str
    slot: float
    status: str  # success | running | failed | timeout | crashed | skipped
    error: str | None


def upstream_slots(store: Store, task_ids: Iterable[str], after: float) -> dict[str, list[UpSlot]]:
    """Per upstream, its slots after `after`, in order. A slot with a success row succeeded;
    else one still running is running; else its last row says how it ended. Runs made with
    `run --no-chain` do not count."""
    ids = sorted(set(task_ids))
    out: dict[str, list[UpSlot]] = {i: [] for i in ids}
    if not ids:
        return out
    rows = store.slots_after(ids, after)
    by_slot: dict[tuple[str, float], list[tuple[str, str | None]]] = {}
    for task_id, slot, status, error in rows:
        by_slot.setdefault((task_id, slot), []).append((status, error))
    for (task_id, slot), seen in by_slot.items():
        statuses = [s for s, _ in seen]
        if "success" in statuses:
            status, error = "success", None
        elif "running" in statuses:
            status, error = "running", None
        else:
            status, error = seen[-1]
        out[task_id].append(UpSlot(task_id, slot, status, error))
    return out


@dataclass(frozen=True, slots=True)
class Pending:
    task: Task
    action: str  # run | skip
    slot: float
    reason: str


def _local(ts: float, zone: tzinfo) -> str:
    return datetime.fromtimestamp(ts, zone).strftime("%H:%M")


def window_of(ts: float, zone: tzinfo, window: float) -> int:
    """Pure: the index of the chain window holding ts; windows are aligned to local midnight
    (a day: the local date)."""
    local = datetime.fromtimestamp(ts, zone)
    wall = local.replace(tzinfo=None) - datetime(1970, 1, 1)
    return int(wall.total_seconds() // window)


def decide_one(task: Task, state: TaskState, ups: list[UpSlot], zone: tzinfo,
               upstream_busy: bool) -> list[Pending]:
    """Pure, one upstream: the slots to claim now, oldest first. Stops at a slot still running
    (or whose ladder is still going: `upstream_busy`, the upstream's lock is held) and after the
    first run (the next one waits for the next round)."""
    up = task.after[0]
    floor = max(state.last_slot or float("-inf"), state.not_before - 1e-6)
    out: list[Pending] = []
    todo = [u for u in ups if u.slot > floor]
    for i, u in enumerate(todo):
        if u.status == "running" or (upstream_busy and i == len(todo) - 1
                                     and u.status != "success"):
            break
        if u.status == "success":
            out.append(Pending(task, "run", u.slot, f"upstream {up} succeeded at "
                               f"{_local(u.slot, zone)}"))
            break
        word = {"timeout": "timed out"}.get(u.status, u.status)
        out.append(Pending(task, "skip", u.slot, f"upstream {up} {word} at "
                           f"{_local(u.slot, zone)}" + (f" ({u.error})" if u.error else "")))
    return out


def decide_many(task: Task, state: TaskState, ups: dict[str, list[UpSlot]],
                zone: tzinfo) -> list[Pending]:
    """Pure, several upstreams: the first chain window after the last claimed one in which
    every upstream has a success; the run's slot is the latest of those successes."""
    done = (window_of(state.last_slot, zone, task.chain_window)
            if state.last_slot is not None else None)
    wins: dict[str, dict[int, float]] = {}
    for up in task.after:
        per: dict[int, float] = {}
        for u in ups.get(up, []):
            if u.status == "success" and u.slot >= state.not_before - 1e-6:
                w = window_of(u.slot, zone, task.chain_window)
                per[w] = max(per.get(w, u.slot), u.slot)
        wins[up] = per
    common = set.intersection(*(set(p) for p in wins.values())) if wins else set()
    ready = sorted(w for w in common if done is None or w > done)
    if not ready:
        return []
    slot = max(wins[up][ready[0]] for up in task.after)
    return [Pending(task, "run", slot, "upstreams " + ", ".join(task.after) + " all succeeded")]


def upstream_busy(config: object, task_id: str) -> bool:
    """The upstream's ladder is still going (its lock is held by a live run)."""
    from ..core.lock_info import holder_alive, lock_path, read_info  # lazy: only for a chain

    # type: ignore[attr-defined]
    return holder_alive(read_info(lock_path(config.locks_dir, task_id)))


def pending_for(store: Store, config: object, tasks: list[Task],
                skip_ids: set[str] = frozenset(),  # type: ignore[assignment]
                states: dict[str, TaskState] | None = None) -> list[Pending]:
    """Every chained task's slots to claim now, from the recorded rows. `states`: the tasks'
    states as the tick would observe them (`why`: a task new or enabled again since the last
    tick counts from now, as the tick will count it); default: the recorded ones."""
    from .observe import observe

    chained = [t for t in tasks if t.after and t.enabled and t.id not in skip_ids]
    if not chained:
        return []
    states = store.task_states() if states is None else states
    out: list[Pending] = []
    for task in chained:
        state = states.get(task.id) or observe(None, task, 0.0)  # the tick observed it
        zone = schedule_zone(task, config)
        floor = state.not_before - 1e-6
        if len(task.after) == 1:
            floor = max(floor, state.last_slot or floor)
        else:
            floor -= task.chain_window  # a window may have begun before not_before
        ups = upstream_slots(store, task.after, floor)
        if len(task.after) == 1:
            busy = upstream_busy(config, task.after[0])
            out += decide_one(task, state, ups[task.after[0]], zone, busy)
        else:
            out += decide_many(task, state, ups, zone)
    return out


def schedule_zone(task: Task, config: object) -> tzinfo:
    from ..core.cron import resolve_zone

    return resolve_zone(task.timezone or config.timezone)  # type: ignore[attr-defined]


# ------------------------------------------------- waiting (the rounds: run/chain_rounds.py)


def previous_run(store: Store, config: object, task_id: str) -> str | None:
    """Where the task's previous run still runs: here (its lock is held by a live run) or on
    another host (its lease, by the database's clock); None when it may start."""
    if upstream_busy(config, task_id):
        return "still running on this host"
    busy = store.lease_busy(task_id) if store.url else None
    if busy is None:
        return None
    return f"still running on host {busy.host} since {to_dt(busy.since):%Y-%m-%d %H:%M:%S} UTC"


def hold_back(store: Store, config: object, todo: list[Pending], now: float,
              said: set[tuple[str, float]], say: Callable[[str], None]) -> list[Pending]:
    """Issue 23: a successful upstream is owed exactly one downstream run. A downstream whose
    previous run still runs (here or on another host) is not claimed: it stays owed, and a
    later round or tick (any host) claims it once that run ended, within the chain window;
    past it, the slot is recorded skipped saying why. Says "waits" once per slot per tick."""
    out = []
    for p in todo:
        busy = previous_run(store, config, p.task.id) if p.action == "run" else None
        if busy is None:
            out.append(p)
        elif now - p.slot > p.task.chain_window:
            out.append(Pending(p.task, "skip", p.slot, f"{p.reason}, but the previous run was"
                               f" {busy} for longer than the chain window"
                               f" ({int(p.task.chain_window)} s)"))
        elif (p.task.id, p.slot) not in said:
            said.add((p.task.id, p.slot))
            say(f"{p.task.id}: waits for the previous run ({busy}) before its run for"
                f" {_when(p.slot, schedule_zone(p.task, config))} ({p.reason}); not claimed yet")
    return out


# --------------------------------------------------------------- words for people


def schedule_text(task: Task) -> str:
    return "after " + ", ".join(task.after)


def explain(config: object, task: Task, at: float) -> list[str]:
    """`why <downstream>`: what it waits for, in plain words."""
    from .observe import observe

    zone = schedule_zone(task, config)
    lines = [f"{task.id} ({task.path.name}): runs {schedule_text(task)}"
             + (f" (all within {int(task.chain_window)} s windows)" if len(task.after) > 1
                else ", once per successful upstream run, for the upstream's slot")]
    if not task.enabled:
        return lines + [f"not due: the task is disabled; `enable {task.id}` turns it on"]
    if not config.state_exists:  # type: ignore[attr-defined]
        return lines + [f"waiting for {', '.join(task.after)}: nothing has run yet"]
    with state_store(config) as store:  # type: ignore[arg-type]
        state = observe(store.task_states().get(task.id), task, at)
        if state.last_slot is not None:
            lines.append(f"last claimed slot: {_when(state.last_slot, zone)}")
        todo = pending_for(store, config, [task], states={task.id: state})
        ups = upstream_slots(store, task.after, state.not_before - 1e-6 - task.chain_window)
        busy = previous_run(store, config, task.id) if todo else None
        # an upstream whose last attempt failed but whose ladder still runs (its lock held: a
        # retry or self-heal to come) is not handled yet: pending_for waits for it
        going = {} if todo else {up: previous_run(store, config, up) for up in task.after}
    for p in todo:
        verb = "due: runs" if p.action == "run" else "the next tick records it skipped"
        if p.action == "run" and busy is not None:
            verb = f"waits for the previous run ({busy}), then runs"
        lines.append(f"{verb} for slot {_when(p.slot, zone)}: {p.reason}")
    if not todo:
        for up in task.after:
            last = ups.get(up, [])[-1:] or None
            if last is None:
                lines.append(f"waiting for {up}: it has not run since {task.id} was first seen")
            elif last[0].status == "running":
                lines.append(f"waiting for {up}: its run for {_when(last[0].slot, zone)} is"
                             " still going")
            elif last[0].status != "success" and going.get(up):
                lines.append(f"waiting for {up}: its run for {_when(last[0].slot, zone)}"
                             f" {last[0].status}, and its retry or self-heal is {going[up]}")
            else:
                lines.append(f"waiting for {up}: its last run ({_when(last[0].slot, zone)}) "
                             f"{last[0].status}, already handled; waiting for its next success")
    return lines


def _when(ts: float, zone: tzinfo) -> str:
    return datetime.fromtimestamp(ts, zone).strftime("%Y-%m-%d %H:%M %Z")


def next_lines(config: object, task: Task, tasks: list[Task], now: float) -> list[str]:
    """`next <downstream>`: "after extract", and the upstream's next fire where it has one."""
    from ..core.clock import to_dt
    from ..core.cron import next_fire

    by_id = {t.id: t for t in tasks}
    lines = [schedule_text(task)]
    for up in task.after:
        upstream = by_id.get(up)
        if upstream is None:
            lines.append(f"{up}: no such task")
            continue
        seen = {task.id}
        while upstream.after and upstream.id not in seen:  # follow the chain to its head
            seen.add(upstream.id)
            head = by_id.get(upstream.after[0])
            if head is None:
                break
            lines.append(f"{upstream.id} runs {schedule_text(upstream)}")
            upstream = head
        fire = next_fire(upstream, config, now)  # type: ignore[arg-type]
        if fire is None:  # a missing or circular head: nothing upstream fires by itself
            lines.append(f"{upstream.id} has no further fire time")
            continue
        zone = schedule_zone(upstream, config)
        when = to_dt(fire.timestamp()).astimezone(zone).strftime("%Y-%m-%d %H:%M %Z (%a)")
        lines.append(f"{upstream.id} next fires {when}")
    return lines
