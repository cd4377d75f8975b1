"""Issue 25 item 4: a Markdown file that is not a task is not an error, and nothing in tasks/
is ignored silently (mdcron/tasks/not_tasks.py)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from http_sink import HttpSink

README = "# Our tasks\n\nOne file per job; see the mdcron README.\n"
NOW = "2026-12-01T06:00:00+00:00"


def test_a_readme_in_tasks_is_ignored_by_the_tick(home: Path, write_task,
                                                  http_sink: HttpSink) -> None:
    (home / "scheduler.yaml").write_text(f"heartbeat_url: {http_sink.url('/hb')}\n",
                                         encoding="utf-8")
    write_task("ok", command="true")
    (home / "tasks" / "README.md").write_text(README, encoding="utf-8")
    for minute in ("06:00", "06:01"):
        out = run_cli(home, "tick", "--now", f"2026-12-01T{minute}:00+00:00")
        assert out.returncode == 0, out.stdout + out.stderr
        assert "README" not in out.stdout + out.stderr
    paths = [r.path for r in http_sink.requests]
    assert paths and all(p == "/hb" for p in paths), paths  # never /hb/fail


def test_validate_and_list_name_it_once_as_not_a_task(home: Path, write_task) -> None:
    write_task("ok", command="true")
    (home / "tasks" / "README.md").write_text(README, encoding="utf-8")
    out = run_cli(home, "validate")
    assert out.returncode == 0, out.stdout + out.stderr
    said = out.stdout + out.stderr
    assert said.count("README.md") == 1 and "not a task: no frontmatter" in said, said
    assert "1 valid task(s), 0 error(s)" in said
    out = run_cli(home, "list", "--now", NOW)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("README.md: warning: not a task: no frontmatter") == 1, out.stderr
    assert "README" not in out.stdout  # not a row, not "invalid"


def test_a_task_missing_its_opening_dashes_is_still_an_error(home: Path) -> None:
    (home / "tasks" / "t.md").write_text('id: t\nschedule: "* * * * *"\ncommand: "true"\n',
                                         encoding="utf-8")
    out = run_cli(home, "validate")
    assert out.returncode == 1
    assert "t.md:1: error: no frontmatter" in out.stderr, out.stderr


def test_markdown_in_a_sub_folder_is_named_as_ignored(home: Path, write_task) -> None:
    write_task("ok", command="true")
    nested = home / "tasks" / "old" / "2025"
    nested.mkdir(parents=True)
    write_task("archived", filename="old/2025/archived.md", command="true")
    (home / "tasks" / "scripts").mkdir()  # a folder without Markdown is nobody's business
    (home / "tasks" / "scripts" / "run.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    out = run_cli(home, "validate")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{home / 'tasks' / 'old'}: warning: a sub-folder with 1 .md file(s)" in out.stdout
    assert "scripts" not in out.stdout + out.stderr
    out = run_cli(home, "list", "--now", NOW)
    assert "old: warning: a sub-folder with 1 .md file(s)" in out.stderr, out.stderr
    assert "archived" not in out.stdout
    out = run_cli(home, "doctor", "--json")
    found = next(c for c in json.loads(out.stdout) if c["check"] == "task files")
    assert found["status"] == "warn" and "a sub-folder with 1 .md file(s)" in found["detail"]
