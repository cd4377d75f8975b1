"""What follows a run: alerts (by notify_on), incidents, the 'recovered' notice, and at the end
of the tick the outbox flush and the heartbeat. Delivery problems never fail a task or a tick.

Rules:
- suspended            -> forced alert (whatever notify_on says) + incident `suspended`
- final outcome timeout -> forced alert (unless notify_on: never) + incident `timeout`
- failed (not suspended) -> alert when notify_on is failure/always; the task is marked alerted
- success               -> 'recovered' notice if a failure had been alerted; open incidents of
                           the task are resolved; a success alert when notify_on is success/always
- a run found crashed / killed as stale by recovery -> forced alert + incident `crashed` /
                          `timeout` (unless notify_on: never), sent before this tick's own runs
- another host's run whose lease this host took (issue 23) -> forced alert + incident `lost`

Lazy imports: most ladders and ticks end with nothing to say, so the outbox (notify), incidents,
the task-file parser and hashing load only when an alert, an incident or a resolution is
written. A tick that crashed is told by cli/emergency.py (it may have no database to write to).

The configured incident_command is a process, and processes are the run/ layer's: each caller
(in run/ or cli/) passes run/incident_command.run_incident_command as `incident_runner`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..core.outcome import Outcome, RunResult
from ..core.records import dataclass
from ..core.units import format_duration
from ..settings.config import Config
from ..state.store import Store, state_store
from ..tasks.task import Task

Say = Callable[[str], None]
# run/incident_command.run_incident_command(command, incident, *, home, environ, secret_names,
# kill_grace) -> an error line or None; never raises
IncidentRunner = Callable[..., str | None]
# sent at once, whatever quiet hours say; incident
FORCED = ("suspended", "timeout", "crashed", "lost")


@dataclass(frozen=True, slots=True)
class Event:
    """One thing worth telling a person about a task."""

    kind: str  # failure success recovered suspended timeout healed crashed
    task: Task
    result: RunResult
    ladder: str = ""  # 'run failed (exit 1) → retry failed (exit 1)'
    next_step: str = ""  # what happens next, in words
    diff: str = ""  # a heal's diff, when it matters
    took: float | None = -1.0  # the run's duration when it differs from result's; None: unknown


def events_for(outcome, was_alerted: bool) -> list[Event]:  # outcome: ladder.LadderOutcome
    """Pure: which events a finished ladder produces."""
    task, final = outcome.task, outcome.final
    if final.outcome is Outcome.SKIPPED:
        return []
    ladder = outcome.summary() if len(outcome.steps) > 1 else ""
    diff = "\n".join(h.diff for h in outcome.heals if h.diff)
    if outcome.decision == "suspend":  # escalation_policy.Step.SUSPEND (a StrEnum)
        nxt = (f"suspended: {outcome.reason}. `enabled: false` and `disabled_reason:"
               f" auto_suspended` were written into {task.path.name}; fix the cause, then run"
               f" `scheduler.py enable {task.id}`.")
        if outcome.suspend_error:  # the file could not take it: the state holds it (held.py)
            nxt = f"suspended: {outcome.reason}. {outcome.suspend_error}."
        if "probation" in outcome.reason and not diff:
            diff = _probation_diff(task)
        return [Event("suspended", task, final, ladder, nxt, diff)]
    events: list[Event] = []
    if final.outcome is Outcome.TIMEOUT and task.notify_on != "never":
        events.append(Event("timeout", task, final, ladder, outcome.reason))
    elif not final.ok and task.notify_on in ("failure", "always"):
        events.append(Event("failure", task, final, ladder, outcome.reason))
    if final.ok:
        if was_alerted:
            events.append(Event("recovered", task, final, ladder, "back to normal"))
        if outcome.heals:
            events.append(Event("healed", task, final, ladder,
                                "healed; on probation (a failure now suspends it)", diff))
        elif task.notify_on in ("success", "always"):
            events.append(Event("success", task, final, ladder))
    return events


def _probation_diff(task: Task) -> str:
    return f"(the heal's diff is in logs/self-heal-audit.log and `scheduler.py show {task.id}`)"


def render(event: Event) -> tuple[str, str]:
    """(title, body) of an alert, plain text that reads well in a chat message."""
    from .notify import format_tail

    task, result = event.task, event.result
    headline = {
        "failure": "failed", "timeout": "timed out", "suspended": "SUSPENDED",
        "recovered": "recovered", "success": "succeeded", "healed": "was healed",
        "crashed": "crashed", "lost": "lost (its host stopped renewing its lease)",
    }.get(event.kind, event.kind)
    title = f"mdcron: {task.title} ({task.id}) {headline}"
    took = result.duration if event.took is not None and event.took < 0 else event.took
    lines = [f"{task.title} ({task.id}): {result.outcome.value}"
             + (f" — {result.fail_reason}" if result.fail_reason else "")
             + (f", {format_duration(took)}" if took is not None else "")]  # unknown: unsaid
    if event.ladder:
        lines.append(f"ladder: {event.ladder}")
    if event.next_step:
        lines.append(f"next: {event.next_step}")
    if event.diff:
        lines.append("change made by the heal:\n" + event.diff[-3000:])
    tail = format_tail(result.output_tail)
    if tail:
        lines.append("last output:\n" + tail)
    return title, "\n".join(lines)


def after_ladder(store: Store, config: Config, outcome, now: float,
                 environ: Mapping[str, str], say: Say, *,
                 incident_runner: IncidentRunner) -> None:
    """Alerts and incidents for one finished ladder. Never raises."""
    try:
        if getattr(outcome, "lost", None):  # issue 23: another host's runs its lease closed
            after_recovery(store, config, outcome.lost, now, environ, say,
                           incident_runner=incident_runner)
        task = outcome.task
        if outcome.final.outcome is Outcome.SKIPPED:
            return
        failed = not outcome.final.ok
        was_alerted = store.set_alerted(task.id, False) if not failed else False
        events = events_for(outcome, was_alerted)
        for event in events:
            _emit(store, config, event, now, environ, say, incident_runner)
        if failed and any(e.kind in ("failure", "timeout", "suspended") for e in events):
            store.set_alerted(task.id, True)
        if not failed:
            from .incidents import resolve_for_task

            resolve_for_task(store, task.id, now, "the task succeeded")
    except Exception as exc:  # notifications must never fail the tick
        say(f"mdcron: could not record alerts for {outcome.task.id}: {exc!r}")


def _emit(store: Store, config: Config, event: Event, now: float, environ: Mapping[str, str],
          say: Say, incident_runner: IncidentRunner) -> None:
    from .notify import Alert, enqueue

    title, body = render(event)
    forced = event.kind in FORCED
    enqueue(store, config, Alert(event.kind, event.task.id, title, body, forced=forced,
                                 destination=event.task.notify_to), now)
    if forced:
        open_incident(store, config, task_id=event.task.id, kind=event.kind,
                      error=event.result.fail_reason or event.next_step,
                      output_tail=event.result.output_tail, now=now, environ=environ, say=say,
                      incident_runner=incident_runner)


def open_incident(store: Store, config: Config, *, task_id: str | None, kind: str,
                  error: str | None, output_tail: str | None, now: float,
                  environ: Mapping[str, str], say: Say, incident_runner: IncidentRunner) -> None:
    from .incidents import get_incident, open_or_bump

    incident_id, new = open_or_bump(store, task_id=task_id, kind=kind, error=error,
                                    output_tail=output_tail, now=now)
    command = config.incident_command
    if new and command:
        incident = get_incident(store, incident_id)
        if incident is not None:
            problem = incident_runner(command, incident, home=config.home, environ=environ,
                                      secret_names=config.secret_names(),
                                      kill_grace=config.kill_grace)
            if problem:
                say(f"mdcron: {problem}")


def scheduler_alert(store: Store, config: Config, *, kind: str, title: str, body: str,
                    now: float, environ: Mapping[str, str], say: Say,
                    incident_runner: IncidentRunner) -> bool:
    """Duplicate ids, a crashed tick: forced alert + incident, never raises. False when the
    database could not take them."""
    from .notify import Alert, enqueue

    try:
        enqueue(store, config, Alert(kind, None, title, body, forced=True), now)
        open_incident(store, config, task_id=None, kind=kind, error=body, output_tail=None,
                      now=now, environ=environ, say=say, incident_runner=incident_runner)
    except Exception as exc:
        say(f"mdcron: could not record the {kind} alert: {exc!r}")
        return False
    return True


def after_recovery(store: Store, config: Config, recovered: list, now: float,
                   environ: Mapping[str, str], say: Say, *,
                   incident_runner: IncidentRunner) -> None:
    """Runs found crashed (their tick died), killed as stale holders, or lost (their host
    stopped renewing their lease, issue 23)."""
    from pathlib import Path

    from ..tasks.taskfile import load_task_file

    for r in recovered:
        state = store.task_state(r.task_id)
        task = load_task_file(Path(state.path), config)[0] if state and state.path else None
        if task is None:
            continue
        status = r.status if r.status in (Outcome.TIMEOUT, Outcome.LOST) else Outcome.CRASHED
        result = RunResult(status, fail_reason=r.reason)
        kind = status.value
        if task.notify_on == "never":  # both are forced otherwise, as a timeout of a ladder
            continue
        row = store.run(r.run_id) or {}
        took = (float(row["duration_ms"]) / 1000  # type: ignore[arg-type]
                if row.get("duration_ms") is not None else None)  # ended unobserved: unknown
        try:
            _emit(store, config, Event(kind, task, result, next_step="the next fire runs as"
                                       " usual", took=took), now, environ, say, incident_runner)
            store.set_alerted(task.id, True)
        except Exception as exc:
            say(f"mdcron: could not record alerts for {task.id}: {exc!r}")


def resolve_reenabled(store: Store, now: float) -> None:
    """A suspended task that a person enabled again (the tick has just observed its file):
    its incidents are over."""
    from .incidents import resolve_for_task

    enabled = store.suspended_but_enabled()
    if enabled:  # a suspension held in the state (its file says enabled) is not over
        from ..schedule.held import held

        holds = held(store)
        enabled = [t for t in enabled if t not in holds]
    for task_id in enabled:
        resolve_for_task(store, task_id, now, "re-enabled")


def finish_tick(store: Store, config: Config, now: float, failed: bool,
                environ: Mapping[str, str], say: Say, failing: set[str] | None = None) -> None:
    """Send what the outbox holds, then tell the dead man's switch we are alive. A tick with
    an empty outbox and no heartbeat does not even import the notification code."""
    if not store.outbox_waiting() and not config.heartbeat_url:
        return
    from .notify import flush, heartbeat

    report = flush(store, config, now, environ, failing)
    for line in report.errors:
        say(f"mdcron: notification: {line}")
    error = heartbeat(config, failed, environ)
    if error:
        say(f"mdcron: heartbeat: {error}")


def flush_now(store: Store, config: Config, now: float, environ: Mapping[str, str],
              say: Say, failing: set[str] | None = None) -> None:
    """Send what the outbox holds now (a forced alert must not wait for the end of the tick).
    Concurrent flushes are safe: each message is claimed before it is sent."""
    from .notify import flush

    for line in flush(store, config, now, environ, failing).errors:
        say(f"mdcron: notification: {line}")


DUPLICATE_ALERT_EVERY = 3600.0


def duplicate_ids(config: Config, duplicates: Mapping[str, list], now: float,
                  environ: Mapping[str, str], say: Say, *,
                  incident_runner: IncidentRunner) -> None:
    """Nothing runs while two files share an id: a forced alert naming both files, at most
    once an hour (or when the set of duplicates changes), and an incident. Never raises."""
    import hashlib
    import json

    from ..tasks.id_lines import located  # issue 25: each file at its id line

    lines = [f"id {task_id!r}: " + located(paths) for task_id, paths in sorted(duplicates.items())]
    body = ("Two task files share an id, so the tick runs nothing until one is renamed:\n"
            + "\n".join(lines))
    digest = hashlib.sha256(body.encode()).hexdigest()
    try:
        with state_store(config) as store:
            last = json.loads(store.get_meta("duplicate_alert") or "{}")
            due = last.get("digest") != digest or now - float(last.get("at", 0)) >= (
                DUPLICATE_ALERT_EVERY)
            if due:
                store.set_meta("duplicate_alert", json.dumps({"digest": digest, "at": now}))
                from .notify import Alert, enqueue

                enqueue(store, config, Alert("duplicate_id", None,
                                             "mdcron: duplicate task ids, nothing runs", body,
                                             forced=True), now)
            open_incident(store, config, task_id=None, kind="duplicate_id", error=body,
                          output_tail=None, now=now, environ=environ, say=say,
                          incident_runner=incident_runner)
            finish_tick(store, config, now, True, environ, say)
    except Exception as exc:
        say(f"mdcron: could not record the duplicate-id alert: {exc!r}")
