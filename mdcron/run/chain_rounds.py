"""The chain rounds (issue 12): claim and run the downstreams whose upstreams are settled, round
after round, until nothing new is claimed. Which slots are owed, and which must wait for a previous
run, is schedule/chains.py's (from the recorded rows); starting them is the run layer's: here,
with dispatch and the resource-deferred runs, for the tick, its chain follower (chain_follow.py)
and `run <id>`.

Lazy imports: the outbox only when a skipped downstream must alert (notify_on: always); the
task-file cache only for `run <id>`'s chain.
"""

from __future__ import annotations

from collections.abc import Callable

from ..schedule.chains import MAX_ROUNDS, check_graph, hold_back, pending_for
from ..state.store import Store
from ..tasks.task import Task
from .dispatch import Planned, describe_outcome
from .dispatch import run_all as dispatch_all
from .resource_runs import start as start_deferred


def run_rounds(ctx: object, store: Store, tasks: list[Task], skip_ids: set[str],
               run_all: Callable[[list[tuple[Task, int]]], list], say: Callable[[str], None],
               healer: object) -> list[tuple[Task, int, object]]:
    """Claim and run eligible downstreams, round after round, until nothing new is claimed.
    `run_all` runs [(task, run id)] and returns their ladder outcomes (dispatch.run_all).
    Returns [(task, run id, LadderOutcome)]."""
    done: list[tuple[Task, int, object]] = []
    said: set[tuple[str, float]] = ctx.chain_said  # type: ignore[attr-defined]
    given_back: set[str] = set()
    for _ in range(MAX_ROUNDS):
        todo = pending_for(store, ctx.config, tasks, skip_ids)  # type: ignore[attr-defined]
        now = ctx.clock.now()  # type: ignore[attr-defined]
        todo = [p for p in todo if p.task.id not in given_back]
        todo = hold_back(store, ctx.config, todo, now, said, say)  # type: ignore[attr-defined]
        if not todo:
            break
        plain = [p for p in todo if not (p.action == "run" and p.task.uses)]
        won = store.claim_slots(
            [(p.task.id, p.slot, p.reason if p.action == "skip" else None, str(p.task.path))
             for p in plain], now, ctx.owner)  # type: ignore[attr-defined]
        for p in plain:
            if p.action == "skip" and (p.task.id, p.slot) in won:
                say(f"{p.task.id}: skipped ({p.reason})")
                # type: ignore[attr-defined]
                alert_skip(store, ctx.config, p.task, p.reason, now, say)
        to_run = [(p.task, won[(p.task.id, p.slot)]) for p in plain
                  if p.action == "run" and (p.task.id, p.slot) in won]
        uses = [Planned(p.task, "run", p.slot, p.reason) for p in todo
                if p.action == "run" and p.task.uses]
        # type: ignore[arg-type]
        deferred = start_deferred(ctx, uses, say, healer, describe_outcome)
        outcomes = run_all(to_run)
        done += [(t, rid, o) for (t, rid), o in zip(to_run, outcomes, strict=True)
                 if not o.released]
        for (t, _), o in zip(to_run, outcomes, strict=True):
            if o.released:  # given back (ladder.not_now, which said so): the next tick retries
                given_back.add(t.id)
        ran = deferred.join()
        done += [(o.task, rid, o) for rid, o in ran]
        if not won and not ran:
            break  # nothing moved (claimed by another tick, or a resource stays busy)
    return done


def alert_skip(store: Store, config: object, task: Task, reason: str, now: float,
               say: Callable[[str], None]) -> None:
    """A downstream skipped for its upstream alerts only with notify_on: always (with
    `failure`, the upstream's own failure alert already tells). Never raises."""
    if task.notify_on != "always":
        return
    from ..alerts.notify import Alert, enqueue  # lazy: only when notify_on: always

    try:
        enqueue(store, config, Alert(  # type: ignore[arg-type]
            "skipped", task.id, f"mdcron: {task.title} ({task.id}) skipped",
            f"{task.title} ({task.id}): skipped — {reason}", destination=task.notify_to), now)
    except Exception as exc:  # notifications never fail the tick
        say(f"mdcron: could not record the alert for {task.id}: {exc!r}")


def run_chain_after_manual(ctx: object, store: Store, healer: object,
                           say: Callable[[str], None], started_by: int | None = None) -> list:
    """`run <id>` succeeded: run what is now eligible, as a tick would. Each run's line says
    its run number ("run 8: load: success in 2s"), and its row that manual run `started_by`
    started it (issue 25). Returns [(run id, LadderOutcome)] in the order they ran."""
    from ..schedule.cache import load_task_set  # lazy: only for `run <id>`

    tasks = load_task_set(ctx.config).tasks  # type: ignore[attr-defined]
    # type: ignore[attr-defined]
    store.observe([(t.id, t.enabled, str(t.path)) for t in tasks], ctx.clock.now())
    _, broken = check_graph(tasks, {t.id: t.enabled for t in tasks})

    def numbered(items: list) -> list:
        ids = {t.id: rid for t, rid in items}

        def line(text: str) -> None:  # "b: success in 0.1s" -> "run 2: b: success in 0.1s"
            task_id = text.split(": ", 1)[0]
            say(f"run {ids[task_id]}: {text}" if task_id in ids else text)

        return dispatch_all(ctx, items, line, healer)  # type: ignore[arg-type]

    done = run_rounds(ctx, store, tasks, broken, numbered, say, healer)
    if started_by is not None:
        for _, rid, _ in done:
            store.add_note(rid, f"started by manual run {started_by}")
    return [(rid, o) for _, rid, o in done]
