"""Issue 26 item 1: `retry: N` and `retry_delay:`, with real task processes, injected slots
(the tick's `now`) and the ladder's one deadline. The delays are real waits of a second or two
(the ladder waits on the monotonic clock); the assertions read the rows' own start times."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from test_ladder import StandInHealer, make_script, query, rows, tick

from mdcron.run.escalation_policy import LadderState, Step, next_step
from mdcron.tasks.run_keys import backoff, retry_delay

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
AT_10 = T0.replace(hour=10)

pytestmark = pytest.mark.usefixtures("state_url_env")


def starts(home: Path, task_id: str) -> list[tuple[str, str, float, float]]:
    return query(home, "SELECT kind, status, started_at, finished_at FROM runs WHERE task_id = ?"
                 " ORDER BY id", (task_id,))


def notes(home: Path, task_id: str) -> list[str]:
    return [r[0] or "" for r in query(home, "SELECT extra FROM runs WHERE task_id = ? ORDER BY id",
                                      (task_id,))]


def test_backoff_is_fixed_or_doubles_up_to_its_cap():
    assert [backoff(retry_delay("30s"), k) for k in (1, 2, 3)] == [30, 30, 30]
    text = retry_delay("exponential 10s..5m")
    assert text == "exponential 10s..5m"
    assert [backoff(text, k) for k in range(1, 7)] == [10, 20, 40, 80, 160, 300]
    assert backoff(None, 1) == 0


def test_policy_retries_n_times_before_the_heals():
    def step(**kw):
        return next_step(LadderState(last_ok=False, heal_available=True, **kw))[0]

    assert step(retry_allowed=3, retried=2) is Step.RETRY
    assert step(retry_allowed=3, retried=3) is Step.HEAL
    assert step(retry_allowed=3, retried=1, retry_blocked=True) is Step.HEAL


def test_retry_three_times_until_it_succeeds(home, write_task):
    counter = home / "count"
    write_task("flaky", schedule="0 10 * * *", retry=3, command=(
        f"echo x >> {counter}; [ $(wc -l < {counter}) -ge 4 ]"))
    tick(home, T0)
    report = tick(home, AT_10)
    [outcome] = report.ladders
    assert outcome.final.ok
    assert rows(home, "flaky") == [(1, "run", "failed"), (2, "retry", "failed"),
                                   (3, "retry", "failed"), (4, "retry", "success")]


def test_retry_delay_spaces_the_reruns_exponentially(home, write_task):
    write_task("down", schedule="0 10 * * *", retry=2, retry_delay="exponential 1s..2s",
               command="exit 1")
    tick(home, T0)
    tick(home, AT_10)
    runs = starts(home, "down")
    assert [r[:2] for r in runs] == [("run", "failed"), ("retry", "failed"), ("retry", "failed")]
    assert runs[1][2] - runs[0][3] >= 1.0  # 1 s, then 2 s (the cap)
    assert runs[2][2] - runs[1][3] >= 2.0


def test_heals_keep_their_place_after_the_reruns(home, write_task):
    make_script(home, "job.sh", "#!/bin/sh\nexit 3\n")
    write_task("job", schedule="0 10 * * *", retry=2, run_as="script", command="job.sh")
    tick(home, T0)
    healer = StandInHealer(["#!/bin/sh\nexit 0\n"])
    tick(home, AT_10, healer)
    assert rows(home, "job") == [(1, "run", "failed"), (2, "retry", "failed"),
                                 (3, "retry", "failed"), (4, "heal", "success"),
                                 (5, "retry", "success")]


def test_a_rerun_that_cannot_start_before_the_deadline_is_recorded(home, write_task):
    """timeout 1 s, a task that ignores TERM (kill_grace 2 s): the first run takes ~3 s of the
    ladder's 1 × 2 + 1 = 3 s, so the rerun (after its 1 s delay) cannot start in time."""
    (home / "scheduler.yaml").write_text("kill_grace: 2\n")
    write_task("stuck", schedule="0 10 * * *", retry=1, retry_delay="1s", timeout="1s",
               command="trap '' TERM; sleep 30")
    tick(home, T0)
    report = tick(home, AT_10)
    [outcome] = report.ladders
    assert rows(home, "stuck") == [(1, "run", "timeout")]
    assert "retry 1 not attempted: past the deadline" in notes(home, "stuck")[0]
    assert "retry 1 not attempted: past the deadline" in outcome.reason


def test_a_waiting_rerun_does_not_hold_up_the_other_tasks(home, write_task):
    """One run slot (max_parallel: 1): `a` fails and waits 3 s for its rerun; `b`, queued
    behind it, runs in that pause instead of after it."""
    (home / "scheduler.yaml").write_text("max_parallel: 1\n")
    write_task("a", filename="1-a.md", schedule="0 10 * * *", retry=1, retry_delay="3s",
               command="exit 1")
    write_task("b", filename="2-b.md", schedule="0 10 * * *", command="true")
    tick(home, T0)
    tick(home, AT_10)
    a_run, a_retry = starts(home, "a")
    [b_run] = starts(home, "b")
    assert a_retry[0] == "retry"
    assert b_run[1] == "success"
    assert a_run[3] <= b_run[2] and b_run[3] <= a_retry[2]


def test_jitter_on_a_chain_and_a_delay_without_retries_are_reported(home):
    from mdcron.settings.config import load_config
    from mdcron.tasks.taskfile import parse_task_text

    config, _ = load_config(home)
    text = "---\nid: down\nschedule: after up\njitter: 1m\ncommand: 'true'\n---\n"
    task, [problem] = parse_task_text(text, home / "tasks" / "down.md", config)
    assert task is None and (problem.key, problem.line) == ("jitter", 4)
    assert "a chain starts when its upstream succeeds" in problem.message
    text = "---\nid: up\nschedule: '@daily'\nretry_delay: 30s\ncommand: 'true'\n---\n"
    task, [problem] = parse_task_text(text, home / "tasks" / "up.md", config)
    assert task is not None and problem.severity == "warning"
    assert (problem.key, problem.line) == ("retry_delay", 4) and "add retry: 3" in problem.message
