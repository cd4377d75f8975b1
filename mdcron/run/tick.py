"""One tick, end to end: load, refuse duplicates, recover, decide, claim, run, record.

State is advanced (slots claimed) before anything runs, so a task that crashes the tick cannot
make the next tick run the same slot again.

Lazy imports: each step loads its modules only when it has work: the cron maths and the cache on
the full path, chains (and their rounds), once_per and the runs that wait for their units
(resource_runs) only when a task uses them, self-heal (and its Claude client)
only with a heal to run, the lost-database guard only after a recreation, alerts only when there
is something to say; the cheapest full tick imports the least (bench: tick, one due).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from ..core import collector
from ..core.clock import Clock, minute_floor, to_dt
from ..core.outcome import Outcome, RunResult
from ..core.problems import Problem
from ..core.records import dataclass, field
from ..schedule.held import honour as honour_held
from ..settings.config import Config
from ..state import idle as fastpath
from ..state.clockback import ahead
from ..state.idle import FUTURE_SLACK
from ..state.meta import record_tick
from ..state.store import Store, TaskState, last_tick, state_store, warm_ahead
from ..tasks.run_keys import decision_time
from ..tasks.task import Task
from . import shared_tick
from .attempt import RunContext, current_owner
from .cgroup_keep import keep_joins_quick
from .dispatch import (  # noqa: F401  (re-exported)
    KEEP_S,
    Planned,
    claim,
    describe_outcome,
    describe_result,
    first_round,
    run_all,
)
from .environment import record_seen_secrets
from .heal_protocol import Healer, SelfHeal
from .ladder import LadderOutcome
from .recovery import Recovered, recover, recover_heals

TYPE_CHECKING = False  # typing stays off the tick's path (issue 27: ~2.5 ms before a due task)
if TYPE_CHECKING:
    from ..schedule.cache import View


@dataclass
class TickReport:
    now: float
    tasks: int = 0
    problems: list[Problem] = field(default_factory=list)
    duplicates: dict[str, list[Path]] = field(default_factory=dict)
    recovered: list[Recovered] = field(default_factory=list)
    planned: list[Planned] = field(default_factory=list)
    results: list[tuple[Task, int, RunResult]] = field(default_factory=list)
    ladders: list[LadderOutcome] = field(default_factory=list)
    lost_claims: list[str] = field(default_factory=list)  # due, but another tick claimed first
    problems_changed: bool = True  # the task-file problems differ from the last tick's
    problems_said: bool = False  # said by run_tick before the runs (issue 25), not at the end
    no_tasks_folder: bool = False  # issue 22: tasks/ is missing (exit 2, an alert)

    @property
    def exit_code(self) -> int:
        if self.duplicates or self.no_tasks_folder:
            return 2
        failed = any(not r.ok and r.outcome is not Outcome.SKIPPED for _, _, r in self.results)
        errors = any(p.severity == "error" for p in self.problems)
        return 1 if failed or errors else 0


def plan(
    tasks: list[Task], states: dict[str, TaskState], config: Config, now: float,
    plain: dict[str, float] | None = None, problems: list[Problem] | None = None,
) -> list[Planned]:
    """Pure: which enabled tasks have a slot to run or to record as skipped at `now`.
    `plain`: id -> the slot the cache alone knows decide() runs (cache.plain_due); those are
    planned without croniter, their reason left "" until fill_reasons (after the runs start).
    A task whose decision raises is left out, with its problem added to `problems`."""
    out: list[Planned] = []
    now_dt = to_dt(now)
    for task in tasks:
        if not task.enabled or task.after:  # chains run from their upstreams' rows (chains.py)
            continue
        if plain and task.id in plain and not task.jitter:
            out.append(Planned(task, "run", plain[task.id], ""))
            continue
        from ..core.cron import decide, schedule_of

        state = states.get(task.id)
        if state is None:
            from ..schedule.observe import observe  # lazy: a task without a state row

            state = observe(None, task, now)
        try:
            decision = decide(
                schedule_of(task, config),
                now=to_dt(decision_time(task, config, now)) if task.jitter else now_dt,
                last_slot=to_dt(state.last_slot) if state.last_slot is not None else None,
                not_before=to_dt(state.not_before),
                catchup=task.catchup if task.catchup is not None else config.catchup,
            )
        except Exception as exc:  # one task's maths never stops the others
            from ..schedule.cache import maths_problem  # lazy: as decide

            if problems is not None:
                problems.append(maths_problem(task.id, task.path, exc))
            continue
        if decision.action in ("run", "skip") and decision.slot is not None:
            out.append(
                Planned(task, decision.action, decision.slot.timestamp(), decision.reason,
                        decision.missed)
            )
    return out


def fill_reasons(planned: list[Planned], config: Config) -> None:
    """The reason decide() gives a plain due slot, for the ones plan() left without."""
    from ..core.cron import _show, schedule_of

    for p in planned:
        if not p.reason and p.action == "run":
            p.reason = f"due: fire at {_show(to_dt(p.slot), schedule_of(p.task, config).zone)}"


def run_tick(
    config: Config,
    clock: Clock,
    *,
    dry_run: bool = False,
    environ: dict[str, str] | None = None,
    say: Callable[[str], None] = print,
    healer: Healer | None = None,
    view: View | None = None,
    store: Store | None = None,
    selfheal: SelfHeal | None = None,
) -> TickReport:
    """One pass. `selfheal`: the self-heal layer, lent by the caller (cli/; run/ sits below
    selfheal/): it makes the ladders' healer (Claude, when a key is set) and settles the heals
    a dead tick left; None: no healer, journals left for a tick that has it. `healer`: a ready
    one instead of selfheal's (tests' stand-ins).
    `view`: the task files as loaded and refreshed by the daemon's held tick (cli/warm.py);
    `store`: its state database, opened ahead (closed here; None: opened here).

    Task files come through the cache (cache.py): only changed files are parsed, and only
    candidates (cached next_due <= now) become Task objects and go through decide()."""
    from ..schedule.cache import load, task_states

    now = clock.now()
    began = time.monotonic()
    report = TickReport(now=now)
    if fastpath.due_seen and store is None and not dry_run and not config.state_url:
        from ..state.dbguard import note_ahead  # lazy: a tick with a due task (issue 27)

        note_ahead(config.db_path, minute_floor(now))  # its fsyncs while the files load
        warm_ahead(config.db_path, now)  # and the log's, which the claim would wait for
    if fastpath.due_seen and not dry_run:
        # the first cgroup join after a quiet spell waits out an RCU grace period (~8-15 ms):
        # paid now, in a thread, while the files load, not by the due task's start (issue 27)
        keep_joins_quick(KEEP_S)
    if view is None:  # issue 27: a tick that may run builds no Entry for a quiet file
        view = load(config, lean=None if dry_run or config.state_url else now)
    report.problems = view.problems
    if not config.tasks_dir.is_dir():  # issue 22: never a silent "nothing due"
        report.no_tasks_folder = True
        if not any(p.path == config.tasks_dir for p in view.problems):  # not said yet (a file
            report.problems = [*view.problems, Problem(  # there: "cannot list", said once)
                config.tasks_dir, f"the tasks folder does not exist: nothing runs; create it"
                f" (`mkdir {config.tasks_dir}`) or restore it")]
    report.tasks = view.count()
    report.duplicates = view.duplicates()
    if (report.duplicates or dry_run) and store is not None:
        store.close()
    if report.duplicates:
        view.close()
        return report  # nothing runs while two files claim one id

    if dry_run:
        if config.state_url:  # issue 11: the states are in PostgreSQL, not in the local cache
            with state_store(config) as shared:
                candidates, states = view.dry_run(now, shared)
        else:
            candidates, states = view.dry_run(now)
        view.close()
        report.planned = plan(candidates, states, config, now, problems=report.problems)
        if any(p.task.once_per for p in report.planned) and config.state_exists:
            from ..schedule.once_per import apply  # lazy: as in _issue12_plan

            with state_store(config) as store:  # issue 25: says what the tick would do
                apply(report.planned, store, config)
        return report

    owner = current_owner()
    with store if store is not None else state_store(config) as store:
        shared_tick.opening(store, config, say, now,  # issue 11: clock skew, the spool
                            environ if environ is not None else os.environ)
        guard = store.metas_with_prefix("database_")  # dbguard.py: a recreated database
        if "database_recreated" in guard:  # alert once
            from ..alerts.recreated import alert_if_recreated  # lazy: only after a recreation

            alert_if_recreated(store, config, now, say)
        report.recovered = recover(config, store, now, owner.pid)
        report.recovered, heal_lines = recover_heals(
            config, store, now, report.recovered,
            selfheal.settle_unfinished if selfheal is not None else None)
        for line in heal_lines:
            say(line)
        shared_tick.after_recovery(store, config, say)
        for r in report.recovered:  # before this tick's own runs: the log reads in event order
            say(f"{r.task_id}: run {r.run_id} marked {r.status.value}: {r.reason}")
        if report.recovered:  # forced alerts and incidents now, not after the slowest task
            _after_recovery(store, config, report.recovered, now, environ, say)
        rows = view.observe(store, now)
        if "database_claimed_until" in guard:  # the lost database's slots do not run again
            from ..state.dbguard import hold_back

            hold_back(store, float(guard["database_claimed_until"]), now)
            rows = store.state_rows()
            view.build_all()  # every Entry: each next_due is checked against the moved rows
        last = last_tick(config, store)
        if ahead(rows, last, now + FUTURE_SLACK):  # the clock went back: clear, say it once
            from .clock_back import clear

            rows = clear(store, config, now, last, say)
            view.build_all()  # as after hold_back
        candidates = view.candidates(rows, now)
        files = [(str(e.id), e.path) for e in view.valid] if store.url else []  # issue 11
        candidates = shared_tick.runnable_here(  # issue 11: hosts:, shared suspensions
            store, config, files, candidates, now, say)
        candidates = honour_held(store, candidates, say)  # issue 22: files that refused it
        report.planned = plan(candidates, task_states(rows, candidates), config, now,
                              view.plain(candidates, rows, now), problems=report.problems)
        # once candidates and plan have added the tasks whose fire times cannot be computed
        with shared_tick.problems_store(store, config) as mine:  # issue 11: this host's
            report.problems_changed = _problems_changed(mine, report.problems)
        broken = _issue12_plan(store, config, report, view, candidates)
        if report.problems_changed:  # issue 25: when found, not after the slowest task
            error = getattr(say, "error", say)
            for line in problem_lines(config, report.problems):
                error(line)
            report.problems_said = True
        view.claimed([(p.task, p.slot) for p in report.planned], rows)
        saved: list[bool] = []

        def save_once() -> None:  # issue 27: the cache is written once the tasks started
            if not saved:
                saved.append(True)
                view.save(store)

        if not any(p.action == "run" for p in report.planned):
            save_once()
        # issue 12: runs of tasks with `uses:` claim once their units are held (resource_runs)
        deferred = [p for p in report.planned if p.action == "run" and p.task.uses]
        # issue 23: with a shared state the other runs claim as workers free up (spread.py)
        spread = [p for p in report.planned
                  if p.action == "run" and not p.task.uses] if store.url else []
        # issue 25: a once_per skip already recorded this period passes without a row
        quiet = [p for p in report.planned if p.quiet]
        store.pass_slots([(p.task.id, p.slot) for p in quiet])
        later = {id(p) for p in (*deferred, *spread, *quiet)}
        # issue 27: the runs past the first round are claimed once the first has started
        first, rest = first_round([p for p in report.planned if id(p) not in later],
                                  config.max_parallel)
        to_run = claim(store, first, now, owner, report.lost_claims)
        if not to_run and not rest and not spread:  # nothing starts here now: collections may
            collector.release()  # run again (runs waiting for their units, chains: core/collector)
        for p in report.planned:
            if p.action == "skip" and not p.quiet and p.task.id not in report.lost_claims:
                say(f"{p.task.id}: skipped slot {to_dt(p.slot).isoformat()}: {p.reason}")
        for task_id in report.lost_claims:
            say(f"{task_id}: due, but another tick claimed this slot first")
        ctx = RunContext(config, clock, owner, environ if environ is not None else dict(os.environ))
        if healer is None and selfheal is not None:
            healer = selfheal.healer(config, ctx.environ, store, clock)
        uses = None
        if deferred:  # issue 12: runs that wait for their units; else nothing to load
            from .resource_runs import start as start_deferred  # lazy: only with `uses:` runs

            uses = start_deferred(ctx, deferred, say, healer, describe_outcome)

        def meanwhile() -> None:  # while the first tasks run: the cache, croniter, reasons
            save_once()
            view.prepare_complete()
            fill_reasons(report.planned, config)

        follower = None
        if any(t.after for t in candidates):  # issue 27: downstreams start as upstreams end
            from .chain_follow import Follower  # lazy: only with a chain among the tasks

            follower = Follower(ctx, candidates, broken, say, healer)
        if spread:
            from .spread import run_spread  # lazy: a shared state with due runs only

            ran, lost = run_spread(ctx, store, spread, say, healer, meanwhile)
            report.lost_claims.extend(lost)
            report.ladders = [o for _, _, o in ran]
            report.results = [(task, rid, o.final) for task, rid, o in ran]
        else:
            def claim_rest() -> list[tuple[Task, int]]:  # in this thread, on its store
                lost = len(report.lost_claims)
                got = claim(store, rest, now, owner, report.lost_claims)
                for task_id in report.lost_claims[lost:]:
                    say(f"{task_id}: due, but another tick claimed this slot first")
                to_run.extend(got)
                return got

            report.ladders = run_all(ctx, to_run, say, healer, meanwhile=meanwhile,
                                     on_end=follower.ended if follower else None, store=store,
                                     more=([p.task for p in rest], claim_rest) if rest else None)
            report.results = [(o.task, rid, o.final) for (_, rid), o in zip(to_run, report.ladders,
                                                                           strict=True)]
        save_once()  # when meanwhile did not run (one task runs in this thread, or it failed)
        view.complete(store)  # croniter only now, once the tasks started (or ran)
        fill_reasons(report.planned, config)
        for rid, o in uses.join() if uses is not None else ():
            report.ladders.append(o)
            report.results.append((o.task, rid, o.final))
        for task, rid, o in follower.join() if follower else ():
            report.ladders.append(o)
            report.results.append((task, rid, o.final))
        if any(t.after for t in candidates):  # issue 12: downstreams whose upstreams succeeded
            from .chain_rounds import run_rounds  # lazy: only with a chain among the tasks

            for task, rid, o in run_rounds(ctx, store, candidates, broken,
                                           lambda items: run_all(ctx, items, say, healer), say,
                                           healer):
                report.ladders.append(o)  # type: ignore[arg-type]
                report.results.append((task, rid, o.final))  # type: ignore[attr-defined]
            if not store.url:  # issue 27: idle again
                store.set_meta("chains_settled",
                               _chains_settled(store, config, candidates, broken))
        from . import pings  # lazy: once the runs ended (issue 27: off the first task's start)
        from .retention import retention  # lazy: as pings

        pings.wait_all(say)  # issue 26: the tasks' pings, each within its deadline
        _aftermath(store, config, report, clock.now(), ctx.environ, say,
                   ctx.failed_destinations)
        retention(config, store, clock.now(), last)  # bounded: a wrong clock takes no history
        store.set_meta("last_tick", repr(clock.now()))
        _record_tick(store, config, now, time.monotonic() - began, say)  # issue 26: metrics
        record_seen_secrets(store, ctx.environ, config.secret_names(), clock.now())  # issue 24
        shared_tick.closing(store, config, clock.now())  # issue 11: this host's own copy
    return report


def problem_lines(config: Config, problems: list[Problem]) -> list[str]:
    """The tick's lines for broken task files (errors only; warnings are `validate`'s)."""
    return [f"mdcron: {p}" + ("" if p.path == config.tasks_dir else " (task skipped)")
            for p in problems if p.severity == "error"]


def _issue12_plan(store: Store, config: Config, report: TickReport, view: View,
                  candidates: list[Task]) -> set[str]:
    """Issue 12: `once_per` slots after this period's success become skips (once_per.py);
    chains are checked (chains.py: cycles, unknown upstreams); returns the ids not to run."""
    if any(p.task.once_per and p.action == "run" for p in report.planned):
        from ..schedule.once_per import apply  # lazy: only with a once_per task to run

        apply(report.planned, store, config)
    if not any(t.after for t in candidates):
        return set()
    from ..schedule.cache import problems_digest
    from ..schedule.chains import check_graph

    known = view.known()  # a lean load's quiet rows included, not built
    problems, broken = check_graph(candidates, {i: on for i, on, _ in known},
                                   {i: Path(path) for i, _, path in known})
    report.problems.extend(problems)
    digest = problems_digest(problems)
    if store.get_meta("chain_problems_digest") != digest:
        store.set_meta("chain_problems_digest", digest)
        report.problems_changed = True
    return broken


def _chains_settled(store: Store, config: Config, candidates: list[Task],
                    broken: set[str]) -> str:
    """The newest run id when no downstream is owed (claimable or waiting) and no upstream
    runs (state/idle.chains_settled); '' otherwise: the next tick is a full one."""
    from ..schedule.chains import pending_for

    if pending_for(store, config, candidates, broken):
        return ""
    ups = {u for t in candidates if t.after and t.enabled and t.id not in broken
           for u in t.after}
    if any(row["task_id"] in ups for row in store.running_rows()):
        return ""
    newest = store.history(1, None)
    return str(newest[0]["id"]) if newest else "0"


def _after_recovery(store: Store, config: Config, recovered: list[Recovered], now: float,
                    environ: dict[str, str] | None, say: Callable[[str], None]) -> None:
    from ..alerts.after_run import after_recovery, flush_now
    from .incident_command import run_incident_command

    env = environ if environ is not None else dict(os.environ)
    after_recovery(store, config, recovered, now, env, say, incident_runner=run_incident_command)
    flush_now(store, config, now, env, say)


def _aftermath(store: Store, config: Config, report: TickReport, now: float,
               environ: dict[str, str], say: Callable[[str], None],
               failing: set[str] | None = None) -> None:
    """The outbox and the heartbeat (each ladder's alerts came when it ended, in after_one;
    recovered runs' before the runs)."""
    if not report.problems_changed and not config.heartbeat_url and store.quiet_end():
        return  # nothing to resolve, say or send: the alerts are not imported (issue 27)
    from ..alerts.after_run import finish_tick, resolve_reenabled

    resolve_reenabled(store, now)
    if report.problems_changed:  # issue 22: a file that does not run, a missing folder
        from ..alerts.task_problems import alert_problems

        try:
            alert_problems(store, config, report.problems, now)
        except Exception as exc:  # alerts never fail the tick
            say(f"mdcron: could not record the task-file alerts: {exc!r}")
    finish_tick(store, config, now, report.exit_code != 0, environ, say, failing)


def _problems_changed(store: Store, problems: list[Problem]) -> bool:
    """Report broken files when they change, not every minute into the cron log."""
    from ..schedule.cache import problems_digest

    digest = problems_digest(problems)
    if store.get_meta("problems_digest") == digest:
        return False
    store.set_meta("problems_digest", digest)
    return True


def _record_tick(store: Store, config: Config, now: float, duration: float,
                 say: Callable[[str], None]) -> None:
    """Issue 26: the tick's figures for /metrics, and `metrics_file` when configured."""
    path = str(config.metrics_file) if config.metrics_file is not None else None
    try:
        record_tick(store, path, now, duration)
    except OSError as exc:  # metrics never fail the tick; said each time
        say(f"mdcron: metrics_file {path}: {exc.strerror or exc}")
