"""One task whose fire times cannot be computed must not stop the tick (design: one bad input
affects only its own task). Validation bounds every number a task file can give, so no task
file found reaches the schedule maths with an out-of-range instant; a damaged or hostile state
row can: a task_state.last_slot some 300,000 years back (written here with sqlite3) makes
datetime raise. The tick reports that task invalid in one line naming its file and runs the
other; `why` and a dry run say the same line instead of a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from faultlib import BEFORE, NOW, render_task, run_cli, runs

NEXT = "2026-11-23T10:01:00+00:00"
SAID = "its next fire cannot be computed (ValueError: year -314918 is out of range)"


def _two_tasks_one_state_out_of_range(home: Path) -> None:
    for task_id in ("bad", "good"):
        (home / "tasks" / f"{task_id}.md").write_text(render_task(
            task_id, schedule="0 10 * * *", command=f"echo {task_id}"))
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    db = sqlite3.connect(home / "state" / "mdcron.db")
    with db:
        db.execute("UPDATE task_state SET last_slot = -1e13 WHERE task_id = 'bad'")
    db.close()


def test_a_state_row_out_of_range_skips_its_task_and_the_other_runs(home: Path) -> None:
    _two_tasks_one_state_out_of_range(home)
    out = run_cli(home, "tick", "--now", NOW)
    assert "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    said = [line for line in (out.stdout + out.stderr).splitlines() if "bad.md" in line]
    assert len(said) == 1 and SAID in said[0] and "tasks/bad.md: error:" in said[0], said
    assert out.returncode == 1
    assert [r[3] for r in runs(home, "good")] == ["success"]
    assert runs(home, "bad") == []
    again = run_cli(home, "tick", "--now", NEXT)  # a known problem is not said every minute
    assert again.returncode == 1 and "bad.md" not in again.stdout + again.stderr


def test_why_and_a_dry_run_say_it_in_one_line(home: Path) -> None:
    _two_tasks_one_state_out_of_range(home)
    why = run_cli(home, "why", "bad")
    assert "Traceback" not in why.stderr and SAID in why.stdout, why.stdout + why.stderr
    dry = run_cli(home, "tick", "--dry-run", "--now", NOW)
    assert "Traceback" not in dry.stderr, dry.stderr
    assert "good: would run" in dry.stdout and SAID in dry.stdout + dry.stderr, dry.stdout
