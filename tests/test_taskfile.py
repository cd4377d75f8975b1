"""Task files → Task objects: a good file loads; every kind of problem is named, placed, fixed."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdcron.core.problems import Problem
from mdcron.schedule.cache import load_task_set
from mdcron.settings.config import Config
from mdcron.tasks.not_tasks import NOT_A_TASK
from mdcron.tasks.task import CATCHUP_ALWAYS, CATCHUP_NEVER, Task
from mdcron.tasks.taskfile import (
    KNOWN_KEYS,
    MAX_BYTES,
    load_task_file,
    parse_task_text,
)

GOOD = """\
---
# nightly database dump
id: backup-db
title: Back up the database
schedule: "30 3 * * *"
timezone: Europe/Riga
timeout: 10m
retry: true
enabled: false
disabled_reason: paused
self_heal: no
notify_on: always
notify_to: ops@example.com
run_as: shell
command: pg_dump app > dump.sql
cwd: work
env: {LANG: C.UTF-8, RETRIES: 3, DEBUG: true}
secrets: [PGPASSWORD]
catchup: 2h
tags: [db, nightly]
model: claude-x
heal_paths: ["scripts/*.sh"]
claude_config: state/claude-backup
---

# Backup

Dumps the database.
"""


@pytest.fixture
def config(home: Path) -> Config:
    return Config(home=home.resolve(), timezone="UTC")


@pytest.fixture
def write(home: Path) -> Callable[..., Path]:
    """Write raw text (or bytes) as tasks/<name>."""

    def write_file(text: str | bytes, name: str = "t.md") -> Path:
        path = home / "tasks" / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_bytes(text.encode("utf-8"))
        return path

    return write_file


def task_text(
    *lines: str, schedule: str | None = '"@daily"', command: str | None = "echo hi"
) -> str:
    """Frontmatter: id: t, the given lines, and (unless None) a schedule and command; a line
    naming one of these keys replaces the default."""
    defaults = {"id": "t", "schedule": schedule, "command": command}
    named = {line.split(":")[0] for line in lines}
    keys = [f"{k}: {v}" for k, v in defaults.items() if v is not None and k not in named]
    return "---\n" + "\n".join([keys[0], *lines, *keys[1:]]) + "\n---\nbody\n"


def only_error(text: str, config: Config, home: Path) -> Problem:
    task, problems = parse_task_text(text, home / "tasks" / "t.md", config)
    errors = [p for p in problems if p.severity == "error"]
    assert task is None, problems
    assert len(errors) == 1, problems
    return errors[0]


def line_of(text: str, start: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(start))


# --- good files -------------------------------------------------------------------------------


def test_good_file_loads_every_field(write, config: Config, home: Path) -> None:
    (home / "work").mkdir()
    path = write(GOOD, "backup.md")
    task, problems = load_task_file(path, config)
    assert problems == []
    assert task == Task(
        id="backup-db",
        path=path.resolve(),
        schedule="30 3 * * *",
        title="Back up the database",
        run_as="shell",
        command="pg_dump app > dump.sql",
        timezone="Europe/Riga",
        timeout=600.0,
        retry=True,
        enabled=False,
        disabled_reason="paused",
        self_heal=False,
        notify_on="always",
        notify_to="ops@example.com",
        cwd="work",
        env={"LANG": "C.UTF-8", "RETRIES": "3", "DEBUG": "true"},
        secrets=("PGPASSWORD",),
        catchup=7200.0,
        tags=("db", "nightly"),
        body="# Backup\n\nDumps the database.",
        model="claude-x",
        heal_paths=("scripts/*.sh",),
        claude_config="state/claude-backup",
    )


def test_minimal_file_gets_defaults(write, config: Config) -> None:
    task, problems = load_task_file(write(task_text()), config)
    assert problems == []
    assert task is not None
    assert (task.title, task.run_as, task.timeout, task.enabled, task.self_heal) == (
        "t", "shell", 600.0, True, True,
    )
    assert (task.catchup, task.tags, task.env, task.body) == (None, (), {}, "body")


def test_crlf_and_byte_order_mark_load(write, config: Config) -> None:
    text = "\ufeff" + task_text("timeout: 90").replace("\n", "\r\n")
    task, problems = load_task_file(write(text), config)
    assert problems == []
    assert task is not None and task.timeout == 90.0 and task.command == "echo hi"


def test_catchup_words_and_null_optionals(write, config: Config) -> None:
    task, _ = parse_task_text(task_text("catchup: always", "notify_to:"), Path("t.md"), config)
    assert task is not None and task.catchup == CATCHUP_ALWAYS and task.notify_to is None
    task, _ = parse_task_text(task_text("catchup: never"), Path("t.md"), config)
    assert task is not None and task.catchup == CATCHUP_NEVER


def test_claude_task_takes_its_prompt_from_the_body(config: Config) -> None:
    text = "---\nid: c\nschedule: '@daily'\nrun_as: claude\n---\nSummarise the logs.\n"
    task, problems = parse_task_text(text, Path("c.md"), config)
    assert problems == [] and task is not None
    assert task.run_as == "claude" and task.command is None and task.body == "Summarise the logs."


def test_unknown_key_is_a_warning_with_a_suggestion(config: Config, home: Path) -> None:
    text = task_text("scheduel: '@hourly'", "colour: red")
    task, problems = parse_task_text(text, home / "tasks" / "t.md", config)
    assert task is not None
    assert [(p.severity, p.key, p.line) for p in problems] == [
        ("warning", "scheduel", 3),
        ("warning", "colour", 4),
    ]
    assert "did you mean 'schedule'?" in problems[0].message
    assert "known keys: after, busy_wait, catchup" in problems[1].message


def test_non_string_keys_are_warnings(config: Config) -> None:
    task, problems = parse_task_text(task_text("on: push", "3: three"), Path("t.md"), config)
    assert task is not None
    assert [p.severity for p in problems] == ["warning", "warning"]
    assert "is not a name" in problems[0].message


def test_known_keys_are_the_task_fields() -> None:
    assert "schedule" in KNOWN_KEYS and "path" not in KNOWN_KEYS and "body" not in KNOWN_KEYS


# --- one test per problem kind: the message names the key, the line and a fix -----------------

CASES = [
    # (lines, key, line-start, fragment of the fix)
    (["id: a/b"], "id", "id: a/b", "letters, digits, '.', '_' or '-'"),
    (["id: a..b"], "id", "id: a..b", "without '..'"),
    (["id: 2024"], "id", "id: 2024", 'put it in quotes: "2024"'),
    (["timeout: ten"], "timeout", "timeout", 'like 90s, 10m, 2h; got "ten"'),
    (["timeout: 0"], "timeout", "timeout", "more than 0 seconds"),
    (["timeout: -5"], "timeout", "timeout", "duration like 90s"),
    (["timeout: 100000000000000000000000000000000000000"], "timeout", "timeout", "at most 366d"),
    (["timeout: true"], "timeout", "timeout", "duration like 90s"),
    (['retry: "yes"'], "retry", "retry", 'number of retries from 0 to 10 (or true = 1'),
    (["retry: 11"], "retry", "retry", "e.g. retry: 3; got 11"),
    (["retry_delay: soon"], "retry_delay", "retry_delay",
     'like 30s or 5m, or exponential 10s..5m; got "soon"'),
    (["retry_delay: exponential 5m..10s"], "retry_delay", "retry_delay", "0 < FIRST <= MOST"),
    (["jitter: -1"], "jitter", "jitter", "like 30s or 2m"),
    (["overlap: forbid"], "overlap", "overlap", "expected one of skip, queue, replace, allow"),
    (["enabled: 1"], "enabled", "enabled", "expected true or false"),
    (["run_as: python"], "run_as", "run_as", "one of shell, script, claude"),
    (["disabled_reason: bored"], "disabled_reason", "disabled_reason", "auto_suspended"),
    (["notify_on: sometimes"], "notify_on", "notify_on", "failure, success, always, never"),
    (["heal_paths: {a: b}"], "heal_paths", "heal_paths", "expected a list like"),
    (["env: [A, B]"], "env", "env", "mapping of NAME: value"),
    (["env: {1X: a}"], "env", "env", "not an environment variable name"),
    (["env: {A: [1, 2]}"], "env", "env", "A: expected a text or number value"),
    (["secrets: [MY-TOKEN]"], "secrets", "secrets", "not an environment variable name"),
    (["catchup: sometimes"], "catchup", "catchup", '"always" or "never"'),
    (["catchup: false"], "catchup", "catchup", '"always" or "never"'),
    (["schedule: 2026-12-01"], "schedule", "schedule", 'e.g. schedule: "@at 2026-12-01T09:00"'),
    (["schedule: 2026-12-01 10:30:00"], "schedule", "schedule", '"@at 2026-12-01T10:30"'),
    (["schedule: '@at tomorrow'"], "schedule", "schedule", "@at 2026-12-01T09:00"),
    (["schedule: '61 * * * *'"], "schedule", "schedule", "schedule: "),
    (["timezone: Mars/Olympus"], "timezone", "timezone", "IANA name like Europe/Riga"),
    (["timezone: ''"], "timezone", "timezone", "timezone: "),
    (["command: ''"], "command", "command", "expected a command, e.g."),
    (["cwd_policy: nowhere"], "cwd_policy", "cwd_policy", "cwd_policies in scheduler.yaml"),
    (["cwd: ../..", ], "cwd", "cwd", "add it to allow_outside_home in scheduler.yaml"),
    (["cwd: .", "cwd_policy: x"], "cwd_policy", "cwd_policy", "either cwd or cwd_policy"),
    (["timeout: 5", "timeout: 6"], "timeout", "timeout: 6", "appears on lines 3 and 4"),
    (["run_as: claude"], "prompt", "run_as", "needs a prompt: a prompt key or the text below"),
]


@pytest.mark.parametrize(("lines", "key", "start", "fix"), CASES, ids=[c[3][:30] for c in CASES])
def test_problem_names_key_line_and_fix(lines, key, start, fix, config, home) -> None:
    text = task_text(*lines)
    if key == "prompt":
        text = text.replace("body\n", "")
    problem = only_error(text, config, home)
    assert (problem.key, problem.line) == (key, line_of(text, start)), problem
    assert problem.message.startswith(f"{key}: "), problem
    assert fix in problem.message, problem


def test_bad_cron_includes_the_schedule_error_text(config: Config, home: Path) -> None:
    from mdcron.core.cron import ScheduleError, parse_schedule, resolve_zone

    with pytest.raises(ScheduleError) as raised:
        parse_schedule("61 * * * *", resolve_zone("UTC"))
    problem = only_error(task_text("schedule: '61 * * * *'"), config, home)
    assert problem.message == f"schedule: {raised.value}"


def test_missing_id_and_schedule_point_at_the_closing_line(config: Config, home: Path) -> None:
    text = "---\ntitle: x\ncommand: echo\n---\n"
    task, problems = parse_task_text(text, home / "tasks" / "t.md", config)
    assert task is None
    assert [(p.key, p.line) for p in problems] == [("id", 4), ("schedule", 4)]
    assert "add a line like id: backup-db before the closing '---' (line 4)" in problems[0].message


def test_missing_command(config: Config, home: Path) -> None:
    problem = only_error(task_text(command=None), config, home)
    assert problem.key == "command" and problem.line == 4
    assert "run_as: shell needs a command, e.g. command: echo hello" in problem.message


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("id: t\nschedule: '@daily'\n", 1, "no frontmatter: a task file starts with a line '---'"),
        ("\n\n---\nid: t\n---\n", 1, "remove the 2 blank line(s) before the opening '---'"),
        ("---\nid: t\nschedule: x\n", 1, "never closed; add a line '---' after the last key"),
        ("---\n- a\n- b\n---\n", 2, "is a list, not a mapping; write one key: value per line"),
        ("---\nid: t\ntitle: [a, b\n---\n", 4, "not valid YAML"),
        ("---\nid: t\n\tschedule: x\n---\n", 3, "indent with spaces, not tabs"),
        ("---\nid: t\nschedule: */5 * * * *\n---\n", 3, 'must be quoted: schedule: "*/5 * * * *"'),
        ("---\nid: t\nschedule: @daily # x\n---\n", 3, 'must be quoted: schedule: "@daily"'),
    ],
)
def test_file_shape_problems(text: str, line: int, fragment: str, config, home) -> None:
    problem = only_error(text, config, home)
    assert problem.line == line, problem
    assert fragment in problem.message, problem


def test_yaml_error_names_the_key_of_its_line(config: Config, home: Path) -> None:
    problem = only_error("---\nid: t\nschedule: */5 * * * *\n---\n", config, home)
    assert problem.key == "schedule"


def test_cwd_outside_home_allowed_by_config(tmp_path: Path, home: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    text = task_text(f"cwd: {outside}")
    strict = Config(home=home.resolve(), timezone="UTC")
    assert only_error(text, strict, home).key == "cwd"
    loose = Config(home=home.resolve(), timezone="UTC", allow_outside_home=(str(outside),))
    task, problems = parse_task_text(text, home / "tasks" / "t.md", loose)
    assert task is not None and problems == []


def test_missing_cwd_folder_is_a_warning(config: Config, home: Path) -> None:
    task, problems = parse_task_text(task_text("cwd: later"), home / "tasks" / "t.md", config)
    assert task is not None
    assert [(p.severity, p.key, p.line) for p in problems] == [("warning", "cwd", 3)]
    assert "does not exist (yet)" in problems[0].message


def test_script_must_exist_relative_to_the_task_folder(config: Config, home: Path) -> None:
    (home / "jobs").mkdir()
    text = task_text("run_as: script", "cwd: jobs", command="./run.sh --fast")
    problem = only_error(text, config, home)
    assert (problem.key, problem.line) == ("command", line_of(text, "command"))
    assert "script './run.sh' not found" in problem.message
    assert f"paths count from the task's folder {home.resolve() / 'jobs'}" in problem.message
    (home / "jobs" / "run.sh").write_text("#!/bin/sh\n")
    (home / "jobs" / "run.sh").chmod(0o755)  # else a warning: it cannot start (issue 25)
    task, problems = parse_task_text(text, home / "tasks" / "t.md", config)
    assert task is not None and problems == []


def test_script_symlink_out_of_home_is_refused(tmp_path: Path, config, home) -> None:
    outside = tmp_path / "evil.sh"
    outside.write_text("#!/bin/sh\n")
    (home / "run.sh").symlink_to(outside)
    problem = only_error(task_text("run_as: script", command="run.sh"), config, home)
    assert problem.key == "command" and "escapes the home folder" in problem.message


# --- bytes: binary, encodings, size -------------------------------------------------------------


def test_nul_bytes(write, config: Config) -> None:
    task, problems = load_task_file(write(b"---\nid: t\n\x00\n---\n"), config)
    assert task is None and len(problems) == 1
    assert problems[0].line == 3 and "contains NUL bytes" in problems[0].message


def test_binary_file_named_md(write, config: Config) -> None:
    blob = bytes(range(256)) * 8
    task, problems = load_task_file(write(blob, "image.md"), config)
    assert task is None and len(problems) == 1 and "not a text file" in problems[0].message


def test_not_utf8(write, config: Config) -> None:
    task, problems = load_task_file(write(b"---\nid: t\ntitle: caf\xe9\n---\n"), config)
    assert task is None and len(problems) == 1
    assert problems[0].line == 3
    assert "not UTF-8 text (bad byte 20); save the file as UTF-8" in problems[0].message


def test_too_large_without_reading_it(write, config: Config, home: Path) -> None:
    path = home / "tasks" / "big.md"
    with open(path, "wb") as handle:  # sparse: 4 GiB that nobody should read
        handle.truncate(4 * 1024**3)
    started = time.monotonic()
    task, problems = load_task_file(path, config)
    assert time.monotonic() - started < 1
    assert task is None and "too large (4294967296 bytes; a task file may be at most 1 MiB)" in (
        problems[0].message
    )


def test_exactly_one_mib_is_allowed(write, config: Config) -> None:
    head = task_text()
    text = head + "x" * (MAX_BYTES - len(head))
    task, problems = load_task_file(write(text), config)
    assert task is not None and problems == []
    task, problems = load_task_file(write(text + "x"), config)
    assert task is None and "too large" in problems[0].message


def test_text_with_lone_surrogates(config: Config) -> None:
    task, problems = parse_task_text("---\nid: \udcff\n---\n", Path("t.md"), config)
    assert task is None and "not UTF-8 text" in problems[0].message


def test_directory_and_fifo_named_md(home: Path, config: Config) -> None:
    (home / "tasks" / "folder.md").mkdir()
    os.mkfifo(home / "tasks" / "pipe.md")
    for name in ("folder.md", "pipe.md"):
        task, problems = load_task_file(home / "tasks" / name, config)
        assert task is None and "not a regular file" in problems[0].message


# --- a folder of files --------------------------------------------------------------------------


def test_one_bad_file_never_hides_another(write, config: Config) -> None:
    write(task_text(), "a-good.md")
    write("no frontmatter here\n", "b.md")
    write(task_text("timeout: ten"), "c.md")
    write(b"\x89PNG\r\n\x1a\n\x00\x00", "d.md")
    write("---\nid: hidden\n---\n", ".editor-swap.md")
    write("---\nid: x\n---\n", "notes.txt")
    found = load_task_set(config)
    tasks, problems = found.tasks, found.problems
    assert [t.path.name for t in tasks] == ["a-good.md"]
    assert [(p.path.name, p.severity) for p in problems] == [  # b.md: not a task (issue 25)
        ("b.md", "warning"), ("c.md", "error"), ("d.md", "error"),
    ]


def test_no_tasks_folder(tmp_path: Path) -> None:
    found = load_task_set(Config(home=tmp_path / "nowhere"))
    assert (found.tasks, found.problems, found.duplicates) == ([], [], {})


def test_duplicate_ids(write, config: Config) -> None:
    a = write(task_text(), "a.md")
    b = write(task_text(), "b.md")
    write(task_text().replace("id: t", "id: other"), "c.md")
    found = load_task_set(config)
    assert found.problems == []
    assert found.duplicates == {"t": [a.resolve(), b.resolve()]}
    assert found.get("other") is not None and found.get("nope") is None


# --- never raises ---------------------------------------------------------------------------------


def _no_internal_errors(problems: list[Problem]) -> None:
    assert not any("internal error" in p.message for p in problems), problems


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.sampled_from(list("-\n :#'\"[]{}*@&!|>\tabcid0.é\r\x00")), max_size=80))
def test_random_frontmatter_never_raises(config: Config, text: str) -> None:
    for candidate in (text, "---\n" + text + "\n---\n", "---\nid: t\n" + text + "\n---\n"):
        task, problems = parse_task_text(candidate, Path("f.md"), config)
        ignored = [p.message for p in problems] == [NOT_A_TASK]  # issue 25: not a task
        assert (task is None) == (ignored or any(p.severity == "error" for p in problems))
        _no_internal_errors(problems)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200))
def test_random_bytes_never_raise(write, config: Config, data: bytes) -> None:
    task, problems = load_task_file(write(b"---\n" + data), config)
    _no_internal_errors(problems)


@pytest.mark.parametrize(
    "line",
    [
        "timeout: " + "9" * 5000,  # beyond Python's int-from-text limit
        "env: &a {A: 1}\nx: [*a, *a, *a]",
        "tags: " + "[" * 200 + "]" * 200,
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c]\n"
        "tags: [*d, *d, *d, *d, *d, *d, *d, *d]",
        "? [a, b]\n: complex key",
        "schedule: !!python/object:os.system echo",
        "timeout: .inf",
        "timeout: .nan",
    ],
)
def test_hostile_yaml_is_reported_not_raised(line: str, config: Config) -> None:
    task, problems = parse_task_text(task_text(line), Path("t.md"), config)
    assert task is None or problems
    _no_internal_errors(problems)
