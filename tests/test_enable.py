"""`enable` gives a task a fresh start (issue 25 items 10 and 13): its count of failures is
reset and its open incidents are resolved, and a fire that passed while it was disabled is not
run. Through the real CLI; tick times are injected, `enable` reads the real clock."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from conftest import run_cli


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


def test_enable_resets_failures_and_resolves_the_incident(home, write_task):
    write_task("flaky", command="exit 3", self_heal=False)
    base = time.time() // 60 * 60 + 3600  # ticks an hour ahead: after the real `enable`
    for k in range(3):  # max_consecutive_failures (3): suspended by the third
        run_cli(home, "tick", "--now", iso(base + 60 * k))
    assert "enabled: false" in (home / "tasks" / "flaky.md").read_text()
    assert json.loads(run_cli(home, "incidents", "--json").stdout), "no incident opened"

    enabled = run_cli(home, "enable", "flaky")
    assert enabled.returncode == 0, enabled.stderr
    assert json.loads(run_cli(home, "incidents", "--json").stdout) == []
    [resolved] = json.loads(run_cli(home, "incidents", "--all", "--json").stdout)
    assert "re-enabled" in json.dumps(resolved)

    run_cli(home, "tick", "--now", iso(base + 180))  # fails once more: 1 in a row, not 4
    assert "enabled: false" not in (home / "tasks" / "flaky.md").read_text()
    [row] = [r for r in json.loads(run_cli(home, "list", "--json").stdout) if r["id"] == "flaky"]
    assert row["enabled"] and row["consecutive_failures"] == 1


def test_enable_mid_minute_does_not_run_the_fire_that_passed(home, write_task):
    """Cron would not run a fire that came while the task was disabled."""
    write_task("every", command="true", enabled=False)
    run_cli(home, "tick", "--now", iso(time.time() - 120))  # the tick has seen it, disabled
    for _ in range(3):  # the minute must not turn between `enable` and the dry run
        before = time.time()
        assert run_cli(home, "enable", "every").returncode == 0
        after = time.time()
        if before // 60 == after // 60 and before % 60 > 0.01:
            break
        run_cli(home, "disable", "every")
    else:
        raise AssertionError("the minute turned during each attempt")
    dry = run_cli(home, "tick", "--dry-run", "--now", iso(after))
    assert "would run" not in dry.stdout, dry.stdout
    later = run_cli(home, "tick", "--dry-run", "--now", iso(after // 60 * 60 + 60))
    assert "every: would run" in later.stdout, later.stdout
