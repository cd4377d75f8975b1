"""What a spooled run's ladder did not get to do (issue 11): after spool.replay records a
result the database could not take when the run ended, the rest of that ladder.

The run itself is over and its slot has passed, so nothing is run again: a retry or a heal
now would start the task late, beside the slot this very tick may be about to run. The rest
is done as the ladder would have ended it with no step left: the consecutive-failure count
advances (or resets on a success), the ladder's rule decides whether the task is suspended
(that many failures in a row, or a failure on probation), and the alert and incident the
ladder would have sent are sent ("failure", "timeout", "suspended", "recovered"), saying that
the result came from the spool.

Lazy imports: a spooled result is rare (the database was away when a run ended), so the ladder,
alerts and task-file modules load only when one is replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from ..core.outcome import Outcome, RunResult

NOTE = ("recorded late from the spool (the database was unreachable or refused the result when"
        " it ended); no retry")


def finish(store, config, recorded: list[tuple[int, RunResult]], now: float,
           environ: Mapping[str, str], say: Callable[[str], None]) -> None:
    """For each (run id, result) spool.replay wrote into its row: the ladder's remaining
    bookkeeping and alerts. Never raises for one run (the tick goes on)."""
    for run_id, result in recorded:
        try:
            _finish_one(store, config, run_id, result, now, environ, say)
        except Exception as exc:
            say(f"run {run_id}: the rest of its ladder could not be done: {exc!r}")


def _finish_one(store, config, run_id: int, result: RunResult, now: float,
                environ: Mapping[str, str], say: Callable[[str], None]) -> None:
    from ..alerts.after_run import after_ladder
    from ..tasks.taskfile import load_task_file
    from .escalation_policy import LadderState, Step, next_step
    from .incident_command import run_incident_command
    from .ladder import LadderOutcome, suspend

    row = store.run(run_id)
    if row is None or result.outcome is Outcome.SKIPPED or row.get("kind") == "heal":
        return
    task_id = str(row["task_id"])
    failed = not result.ok
    count = store.count_failure(task_id, failed=failed)
    task = None
    if row.get("task_file"):
        task = load_task_file(Path(str(row["task_file"])), config)[0]
    if task is None or task.id != task_id:
        say(f"{task_id}: run {run_id} {result.outcome.value} counted from the spool"
            f" ({count} failure(s) in a row); its task file cannot be read, so no alert")
        return
    probation = store.probation_until(task_id)
    step, reason = next_step(LadderState(
        last_ok=not failed, retry_allowed=False, on_probation=probation is not None
        and probation > now, failures_in_a_row=count,
        max_consecutive=config.max_consecutive_failures))
    store.add_note(run_id, NOTE)
    outcome = LadderOutcome(task, result, step, f"{reason}; {NOTE}",
                            steps=[(int(row.get("attempt") or 1), "run", result)],
                            failures_in_a_row=count)
    if step is Step.SUSPEND:
        from ..core.clock import Clock, to_dt
        from .attempt import RunContext, current_owner

        ctx = RunContext(config, Clock(to_dt(now)), current_owner(), environ)
        outcome.suspend_error = suspend(ctx, store, task)
    after_ladder(store, config, outcome, now, environ, say,
                 incident_runner=run_incident_command)
    say(f"{task_id}: run {run_id} {result.outcome.value} from the spool: "
        + ("suspended: " if step is Step.SUSPEND else "") + reason)
