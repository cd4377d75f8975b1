"""Issue 25 item 3: times people type are read where they mean them, and the command says so.

`tick --now`, `next --after` (and `list --now`, `disable --until`) without a UTC offset are read in
the config's zone, `why <id> --at` in the task's; `next <id> --tz Z` converts the task's real fire
instants to Z. Every test pins the system zone to UTC (TZ), so reading in the system's zone, as
before, gives a different answer than the config's Europe/Riga or the task's New York.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from conftest import REPO, run_cli

UTC_ENV = {"TZ": "UTC"}


def _readme_block(after: str, fence: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(fence, text.index(after)) + len(fence)
    return text[start:text.index("```", start)]


def _readme_example_home(home: Path) -> None:
    """The README's own example: its task file (Task files), the shipped tasks, and the shipped
    example config as scheduler.yaml."""
    for shipped in (REPO / "tasks").glob("*.md"):
        shutil.copy(shipped, home / "tasks" / shipped.name)
    (home / "tasks" / "backup-notes.md").write_text(
        _readme_block("## Task files", "```markdown\n"), encoding="utf-8")
    shutil.copy(REPO / "scheduler.example.yaml", home / "scheduler.yaml")


def test_readme_what_would_run_at_six_skips_nothing(home: Path) -> None:
    _readme_example_home(home)
    commands = _readme_block("## Commands", "```sh\n")
    line = next(x for x in commands.splitlines() if "what would run at 06:00?" in x)
    assert "--now 2026-12-01T06:00 " in line  # no offset: read in the config's zone
    args = line.split("#")[0].split()
    assert args[:2] == ["python3", "scheduler.py"], line
    # a real tick days before: the tasks are known, their fires since then are due at 06:00
    first = run_cli(home, "tick", "--now", "2026-11-30T12:00:00+00:00", env=UTC_ENV)
    assert first.returncode == 0, first.stderr
    out = run_cli(home, *args[2:], env=UTC_ENV)
    assert out.returncode == 0, out.stderr
    said = out.stdout + out.stderr
    assert "would skip" not in said, said
    for task_id in ("backup-notes", "hello", "disk-space"):
        assert re.search(rf"^{task_id}: would run", out.stdout, re.M), said
    assert "read in Europe/Riga, the config's zone" in said, said


def test_why_at_is_read_in_the_tasks_zone(home: Path, write_task) -> None:
    (home / "scheduler.yaml").write_text("timezone: Europe/Riga\n", encoding="utf-8")
    write_task("ny", schedule="30 9 * * *", timezone="America/New_York", command="true")
    out = run_cli(home, "why", "ny", "--at", "2026-12-01T09:30", env=UTC_ENV)
    assert out.returncode == 0, out.stderr
    assert "asked about 2026-12-01 09:30 EST" in out.stdout, out.stdout
    assert "read in America/New_York, the task's zone" in out.stdout, out.stdout


def test_next_tz_converts_the_tasks_real_fires(home: Path, write_task) -> None:
    write_task("ny", schedule="30 9 * * *", timezone="America/New_York", command="true")
    out = run_cli(home, "next", "ny", "--tz", "Europe/Berlin", "-n", "2", "--json",
                  "--after", "2026-12-01T00:00:00+00:00", env=UTC_ENV)
    assert out.returncode == 0, out.stderr
    # 09:30 in New York (UTC-5) is 15:30 in Berlin (UTC+1), not 09:30 Berlin
    assert json.loads(out.stdout) == ["2026-12-01T15:30:00+01:00", "2026-12-02T15:30:00+01:00"]


def test_next_after_without_offset_is_read_in_the_configs_zone(home: Path) -> None:
    (home / "scheduler.yaml").write_text("timezone: Europe/Riga\n", encoding="utf-8")
    out = run_cli(home, "next", "0 6 * * *", "-n", "1", "--json",
                  "--after", "2026-12-01T05:30", env=UTC_ENV)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["2026-12-01T06:00:00+02:00"]  # 05:30 Riga, not UTC
    assert "--after 2026-12-01T05:30 has no UTC offset: read in Europe/Riga" in out.stderr


def test_tick_now_with_an_offset_says_nothing_about_zones(home: Path, write_task) -> None:
    (home / "scheduler.yaml").write_text("timezone: Europe/Riga\n", encoding="utf-8")
    write_task("t", command="true")
    out = run_cli(home, "tick", "--dry-run", "--now", "2026-12-01T06:00:00+00:00", env=UTC_ENV)
    assert out.returncode == 0, out.stderr
    assert "UTC offset" not in out.stdout + out.stderr
