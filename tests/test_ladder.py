"""The escalation ladder with real task processes and a stand-in healer (a test double of the
Healer interface; the Claude healer is tested on its own)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mdcron.core.clock import Clock
from mdcron.run.heal_protocol import HealRecord
from mdcron.run.tick import run_tick
from mdcron.settings.config import load_config
from mdcron.state.store import state_store
from mdcron.tasks.task import Task

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


# every ladder test on both state back ends (issue 11), through MDCRON_STATE_URL
pytestmark = pytest.mark.usefixtures("state_url_env")


class StandInHealer:
    """Heals by writing given text into the task's script; counts its calls."""

    def __init__(self, fixes: list[str | None], available: bool = True):
        self.fixes = list(fixes)
        self.calls: list[dict] = []
        self.available = available
        self.lock = threading.Lock()

    def unavailable_reason(self, task: Task) -> str | None:
        return None if self.available else "stand-in switched off"

    def heal(self, task, *, attempt, failure, previous, deadline, run_id) -> HealRecord:
        with self.lock:
            self.calls.append({"attempt": attempt, "error": failure.fail_reason,
                               "previous": previous})
            fix = self.fixes.pop(0) if self.fixes else None
        if fix is None:
            return HealRecord(outcome="no_change", diagnosis="could not find the cause")
        script = task.path.parent.parent / task.command.split()[0]
        old = script.read_text()
        script.write_text(fix)
        return HealRecord(outcome="changed", diagnosis=f"fixed the script (attempt {attempt})",
                          diff=f"-{old}+{fix}", changed=(script,))


def tick(home: Path, at: datetime, healer=None):
    config, _ = load_config(home)
    return run_tick(config, Clock(at), say=lambda _l: None, environ={"PATH": "/usr/bin:/bin"},
                    healer=healer)


def query(home: Path, sql: str, args: tuple = ()) -> list[tuple]:
    with state_store(load_config(home)[0]) as store:
        return [tuple(r) for r in store.connect().execute(sql, args).fetchall()]


def rows(home: Path, task_id: str) -> list[tuple]:
    return query(home, "SELECT attempt, kind, status FROM runs WHERE task_id = ? ORDER BY id",
                 (task_id,))


def make_script(home: Path, name: str, body: str) -> None:
    path = home / name
    path.write_text(body)
    path.chmod(0o755)


def test_retry_succeeds_the_second_time(home, write_task):
    counter = home / "count"
    write_task("flaky", schedule="0 10 * * *", retry=True, command=(
        f"echo x >> {counter}; [ $(wc -l < {counter}) -ge 2 ]"))
    tick(home, T0)
    report = tick(home, T0.replace(hour=10))
    [outcome] = report.ladders
    assert outcome.final.ok and outcome.decision.value == "done"
    assert rows(home, "flaky") == [(1, "run", "failed"), (2, "retry", "success")]


def test_heal_fixes_a_broken_script_then_probation(home, write_task):
    make_script(home, "job.sh", "#!/bin/sh\nexit 1\n")
    write_task("broken", schedule="0 10 * * *", run_as="script", command="job.sh")
    healer = StandInHealer(["#!/bin/sh\necho fixed\n"])
    tick(home, T0)
    [outcome] = tick(home, T0.replace(hour=10), healer).ladders
    assert outcome.final.ok and len(outcome.heals) == 1
    assert rows(home, "broken") == [(1, "run", "failed"), (2, "heal", "success"),
                                     (3, "retry", "success")]
    [(until,)] = query(home, "SELECT probation_until FROM task_state WHERE task_id='broken'")
    assert until > T0.replace(hour=10).timestamp() + 6 * 86400
    # on probation: the next failure suspends at once, without healing
    make_script(home, "job.sh", "#!/bin/sh\nexit 2\n")
    [again] = tick(home, T0.replace(hour=10) + timedelta(days=1), healer).ladders
    assert again.decision.value == "suspend" and "probation" in again.reason
    assert len(healer.calls) == 1


def test_two_failed_heals_suspend_and_edit_only_two_keys(home):
    make_script(home, "job.sh", "#!/bin/sh\nexit 1\n")
    text = ("---\n# nightly import; ask Ana before changing\nid: doomed   # stable id\n"
            "schedule: '0 10 * * *'   # ten o'clock\nrun_as: script\ncommand: job.sh\n"
            "retry: true\nenabled: true  # on\n---\n\nBody with --- and # marks.\n")
    path = home / "tasks" / "doomed.md"
    path.write_text(text)
    healer = StandInHealer(["#!/bin/sh\nexit 3\n", "#!/bin/sh\nexit 4\n"])
    tick(home, T0)
    [outcome] = tick(home, T0.replace(hour=10), healer).ladders
    assert outcome.decision.value == "suspend" and "after 2 heal" in outcome.reason
    assert rows(home, "doomed") == [
        (1, "run", "failed"), (2, "retry", "failed"), (3, "heal", "success"),
        (4, "retry", "failed"), (5, "heal", "success"), (6, "retry", "failed")]
    assert healer.calls[1]["previous"].diagnosis.startswith("fixed the script")
    assert healer.calls[1]["error"] == "exit 3"
    assert path.read_text() == text.replace(
        "enabled: true  # on\n", "enabled: false  # on\ndisabled_reason: auto_suspended\n")
    assert tick(home, T0.replace(hour=10) + timedelta(days=1), healer).planned == []


def test_without_healer_the_third_failed_tick_suspends(home, write_task):
    path = write_task("failing", schedule="0 * * * *", command="exit 1")
    tick(home, T0 - timedelta(minutes=1))
    decisions = []
    for hour in range(3):
        [o] = tick(home, T0 + timedelta(hours=hour)).ladders
        decisions.append((o.decision.value, o.failures_in_a_row))
    assert decisions == [("give_up", 1), ("give_up", 2), ("suspend", 3)]
    assert "disabled_reason: auto_suspended" in path.read_text()


def test_success_resets_the_count(home, write_task):
    flag = home / "fail"
    flag.touch()
    write_task("sometimes", schedule="0 * * * *", command=f"[ ! -e {flag} ]")
    tick(home, T0 - timedelta(minutes=1))
    tick(home, T0)
    tick(home, T0 + timedelta(hours=1))
    flag.unlink()
    [ok] = tick(home, T0 + timedelta(hours=2)).ladders
    assert ok.failures_in_a_row == 0
    flag.touch()
    [o] = tick(home, T0 + timedelta(hours=3)).ladders
    assert (o.decision.value, o.failures_in_a_row) == ("give_up", 1)


def test_self_heal_false_uses_the_consecutive_rule(home, write_task):
    write_task("nohealing", schedule="0 10 * * *", command="exit 1", self_heal=False)
    healer = StandInHealer(["unused"])
    tick(home, T0)
    [o] = tick(home, T0.replace(hour=10), healer).ladders
    assert o.decision.value == "give_up" and healer.calls == []
