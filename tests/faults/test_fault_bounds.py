"""Hostile sizes (issue 22, items 1 and 2): YAML nested 25,000 deep, alias bombs, numbers and
instants past what date maths can hold. Each bad file is invalid with a reason of its own and
every other task still runs; each bad command-line value is one line and exit 2.

Every command runs in a real subprocess with a deadline (a SIGSEGV or a blow-up must not take the
suite with it); the config bomb also runs under an address-space limit, to show it is refused
before it grows."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from faultlib import NOW, SCHEDULER, render_task, run_cli, runs

from mdcron.core.cron import parse_schedule
from mdcron.tasks.frontmatter_edit import EditError, edit_task_file

DEADLINE = 20.0  # seconds; the fixed code needs well under 1 s, the old one died or ran minutes


def alias_bomb(levels: int, indent: str = "") -> str:
    """`a0: &a0 [x,..9]`, `a1: &a1 [*a0,..9]`, ...: a few hundred bytes, 9**levels values."""
    lines = [f"{indent}a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for n in range(1, levels):
        lines.append(f"{indent}a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


HOSTILE_FRONTMATTER = {
    "deep-flow-lists": "x: " + "[" * 25_000 + "\n",
    "deep-flow-maps": "x: " + "{a: " * 25_000 + "\n",
    "alias-bomb": "extra:\n" + alias_bomb(10, "  "),
    "self-alias": "extra: &a [1, *a]\n",
}


def hostile_task(home: Path, shape: str) -> Path:
    path = home / "tasks" / "hostile.md"
    path.write_text('---\nid: hostile\nschedule: "* * * * *"\ncommand: echo x\n'
                    + HOSTILE_FRONTMATTER[shape] + "---\n", encoding="utf-8")
    (home / "tasks" / "good.md").write_text(render_task("good", command="echo ok"),
                                            encoding="utf-8")
    return path


def timed(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    out = run_cli(home, *args, timeout=DEADLINE * 3)
    return out, time.monotonic() - started


def no_crash(out: subprocess.CompletedProcess[str]) -> None:
    assert out.returncode >= 0, f"killed by signal {-out.returncode}: {out.stderr[-500:]}"
    assert "Traceback" not in out.stdout + out.stderr, out.stderr[-2000:]


@pytest.mark.parametrize("shape", sorted(HOSTILE_FRONTMATTER))
def test_hostile_yaml_in_one_task_file_is_invalid_and_the_rest_run(home, shape):
    path = hostile_task(home, shape)
    tick, took = timed(home, "tick", "--now", NOW)
    no_crash(tick)
    assert took < DEADLINE
    assert tick.returncode == 1, tick.stderr
    assert f"{path}:" in tick.stderr and "refused unread" in tick.stderr, tick.stderr
    assert [(r[0], r[3]) for r in runs(home)] == [("good", "success")]

    validate, took = timed(home, "validate")
    no_crash(validate)
    assert took < DEADLINE and validate.returncode == 1
    key = HOSTILE_FRONTMATTER[shape].split(":")[0]
    assert re.search(rf"{re.escape(str(path))}:\d+: error \[{key}\]: ", validate.stderr)
    assert "1 valid task(s), 1 error(s)" in validate.stdout

    listing, took = timed(home, "list")
    no_crash(listing)
    assert took < DEADLINE and listing.returncode == 0
    assert "invalid" in listing.stdout and "good" in listing.stdout

    why, took = timed(home, "why", "hostile")
    no_crash(why)
    assert took < DEADLINE and why.returncode == 2
    assert str(path) in why.stderr and "refused unread" in why.stderr


def test_an_alias_bomb_is_refused_by_disable_and_by_the_editor_at_once(home):
    path = hostile_task(home, "alias-bomb")
    before = path.read_bytes()
    out, took = timed(home, "disable", "hostile")
    no_crash(out)
    assert took < DEADLINE and out.returncode == 2
    assert "refused unread" in out.stderr and "alias" in out.stderr
    # The byte-preserving editor (suspension, disable) on its own: it compares what it read
    # with what it wrote, which walked 9**10 values.
    started = time.monotonic()
    with pytest.raises(EditError, match="too complex to edit safely"):
        edit_task_file(path, {"enabled": False})
    assert time.monotonic() - started < DEADLINE
    assert path.read_bytes() == before


def _limit_memory() -> None:
    limit = 1024 * 1024 * 1024  # 1 GiB of address space: the old code needed 2 GiB and more
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


CONFIG_BOMBS = {
    "alias-bomb": "extra:\n" + alias_bomb(9, "  "),
    "deep-nesting": "extra: " + "[" * 25_000 + "\n",
}


@pytest.mark.parametrize("command", ["validate", "tick"])
@pytest.mark.parametrize("bomb", sorted(CONFIG_BOMBS))
def test_a_hostile_scheduler_yaml_is_refused_fast_and_small(home, bomb, command):
    (home / "scheduler.yaml").write_text(CONFIG_BOMBS[bomb], encoding="utf-8")
    (home / "tasks" / "good.md").write_text(render_task("good"), encoding="utf-8")
    args = [command, "--now", NOW] if command == "tick" else [command]
    started = time.monotonic()
    out = subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), *args],
                         capture_output=True, text=True, timeout=DEADLINE * 3,
                         preexec_fn=_limit_memory)
    took = time.monotonic() - started
    no_crash(out)
    assert took < DEADLINE
    assert out.returncode == 2, out.stderr
    first = out.stderr.splitlines()[0]
    assert first.startswith(f"mdcron: {home / 'scheduler.yaml'}:") and "refused unread" in first
    assert "MemoryError" not in out.stderr


BAD_SCHEDULES = {
    "@every 3000000d": "at least 1m and at most 366d",
    "@every 1000000w": "at least 1m and at most 366d",
    "@at 9999-12-31T23:00": "from 2000-01-01 to 8999-12-31",
    "@at 9999-12-31T23:00-05:00": "from 2000-01-01 to 8999-12-31",
    "@at 1999-06-01T09:00": "from 2000-01-01 to 8999-12-31",
}


@pytest.mark.parametrize("schedule", sorted(BAD_SCHEDULES))
def test_a_schedule_out_of_range_is_invalid_with_the_range_and_the_rest_run(home, schedule):
    (home / "tasks" / "bad.md").write_text(render_task("bad", schedule=schedule, command="true"),
                                           encoding="utf-8")
    (home / "tasks" / "good.md").write_text(render_task("good", command="echo ok"),
                                            encoding="utf-8")
    validate = run_cli(home, "validate")
    no_crash(validate)
    assert validate.returncode == 1
    assert f"bad.md:3: error: schedule: bad schedule '{schedule}'" in validate.stderr
    assert BAD_SCHEDULES[schedule] in validate.stderr
    tick = run_cli(home, "tick", "--now", NOW)
    no_crash(tick)
    assert tick.returncode == 1 and "bad.md:3" in tick.stderr
    assert [(r[0], r[3]) for r in runs(home)] == [("good", "success")]
    for args in (["list"], ["why", "good"], ["next", "good"], ["next", schedule]):
        out = run_cli(home, *args)
        no_crash(out)
        assert out.returncode in (0, 2), (args, out.stderr)


OUT_OF_RANGE = [
    (["tick", "--now", "9999-12-31"], "--now"),
    (["tick", "--now", "9999-12-31T23:59:00+00:00"], "--now"),
    (["tick", "--now", "1970-01-01T00:00:00+00:00"], "--now"),
    (["list", "--now", "9999-12-31T23:59:00+00:00"], "--now"),
    (["next", "good", "--after", "9999-12-31T23:58"], "--after"),
    (["next", "* * * * *", "--after", "9999-12-31T23:58"], "--after"),
    (["why", "good", "--at", "9999-12-31T23:59:00+00:00"], "--at"),
]


@pytest.mark.parametrize(("args", "option"), OUT_OF_RANGE, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else v)
def test_an_instant_out_of_range_on_the_command_line_is_one_line_and_exit_2(home, args, option):
    (home / "tasks" / "good.md").write_text(render_task("good", command="true"),
                                            encoding="utf-8")
    run_cli(home, "tick", "--now", NOW)  # state exists: the idle path must not take it either
    out = run_cli(home, *args)
    no_crash(out)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.splitlines() == [out.stderr.strip()], out.stderr
    assert out.stderr.startswith(f"mdcron: {option}: ")
    assert "out of range: mdcron handles instants from 2000-01-01 to 8999-12-31" in out.stderr


@pytest.mark.parametrize("expression", ["* * * * *", "30 3 * * *", "@yearly", "@every 1d",
                                        "@every 366d"])
def test_schedule_maths_at_the_end_of_time_says_no_fire_instead_of_raising(expression):
    """A state row or a clock from before these bounds may still hold such an instant."""
    schedule = parse_schedule(expression, ZoneInfo("America/New_York"))
    end = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
    assert schedule.next_after(end) is None
    assert schedule.next_after(datetime(8999, 12, 31, 23, 59, tzinfo=UTC)) is None
    latest = schedule.latest_at_or_before(end)
    assert latest is not None and latest < datetime(9000, 1, 1, tzinfo=UTC)


def test_next_refuses_an_absurd_count_at_once(home):
    out, took = timed(home, "next", "@daily", "-n", "100000000")
    no_crash(out)
    assert took < DEADLINE and out.returncode == 2
    assert "expected a whole number from 1 to 1000" in out.stderr


BAD_CONFIG_NUMBERS = {
    "resources: {gpu: 1000000}": "resources",
    "max_parallel: 1000000000": "max_parallel",
    "kill_grace: 1000000000": "kill_grace",
    "lease_seconds: 99999999d": "lease_seconds",
    "catchup: 100000d": "catchup",
    "claude: {timeout: 5000d}": "claude.timeout",
    "notify: {max_attempts: 1000000000}": "notify.max_attempts",
}


@pytest.mark.parametrize("line", sorted(BAD_CONFIG_NUMBERS))
def test_a_config_number_out_of_range_is_refused_with_its_range(home, line):
    (home / "scheduler.yaml").write_text(line + "\n", encoding="utf-8")
    out, took = timed(home, "list")
    no_crash(out)
    assert took < DEADLINE and out.returncode == 2
    first = out.stderr.splitlines()[0]
    assert f"scheduler.yaml: error [{BAD_CONFIG_NUMBERS[line]}]:" in first
    assert " to " in first  # the allowed range is named
