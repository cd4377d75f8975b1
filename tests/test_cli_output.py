"""Issue 25: what a newcomer sees at 80 columns: tables that fit, relative times and missed fires,
`show` in words, one rule for unknown ids and bad numbers, help for every option,
`validate FILE…` and shell completion. Every table test sets its own width."""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest
from conftest import SCHEDULER, run_cli

BEFORE = "2026-11-23T09:58:00+00:00"
TEN = "2026-11-23T10:00:00+00:00"
LONG_ID = "nightly-warehouse-export-to-the-analytics-bucket-with-sha256-v2x"
NARROW = {"COLUMNS": "80"}

TASKS = {  # id: (schedule, command, title)
    "backup-postgres": ("0 2 * * *", "pg_dump app | gzip > /backup/app.sql.gz",
                        "Nightly PostgreSQL dump to S3"),
    "rotate-logs": ("15 3 * * *", "logrotate /etc/logrotate.conf", "Rotate application logs"),
    "disk-space": ("*/30 * * * *", "df -h . | tail -n 1", "Report free disk space"),
    "hello": ("0 * * * *", "echo hello", "Say hello every hour"),
    "sync-crm": ("*/15 8-18 * * 1-5", "echo sync", "Sync CRM contacts during office hours"),
    "weekly-report": ("0 7 * * 1", "echo report", "Weekly KPI report for the whole team"),
    "cert-check": ("0 10 * * *", "exit 3", "Check TLS certificate expiry"),
    "cleanup-tmp": ("30 4 * * *", "echo clean", "Clean /tmp of old uploads"),
    "renew-tokens": ("0 */6 * * *", "echo renew", "Renew OAuth tokens"),
    "fetch-rates": ("5 6 * * 1-5", "echo rates", "Fetch exchange rates"),
    LONG_ID: ("45 23 * * *", "echo export", "Export the warehouse to the analytics bucket"),
}


@pytest.fixture
def realistic(home, write_task):
    """Eleven tasks (one id 64 characters long), one disabled, two invalid files, and runs."""
    for task_id, (schedule, command, title) in TASKS.items():
        write_task(task_id, f"# {title}\n\nWhat {task_id} is for.\n", schedule=schedule,
                   command=command, title=title, timeout="5m", tags=["ops", "nightly"],
                   enabled=task_id != "cleanup-tmp")
    (home / "tasks" / "broken-yaml.md").write_text('---\nid: broken\nschedule: "0 2 * *\n---\n')
    (home / "tasks" / "bad-schedule.md").write_text(
        "---\nid: bad-schedule\nschedule: 0 25 * * *\ncommand: echo x\ntimeout: forever\n---\n")
    assert len(LONG_ID) == 64
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 1  # the invalid files
    assert run_cli(home, "tick", "--now", TEN).returncode == 1  # cert-check fails
    return home


def lines_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_list_is_one_line_per_task_at_80_columns(realistic):
    out = run_cli(realistic, "list", "--now", "2026-11-23T10:03:30+00:00", env=NARROW)
    assert out.returncode == 0, out.stderr
    lines = lines_of(out.stdout)
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert lines[1].split()[:6] == ["id", "status", "next", "run", "last", "run"]
    rows = {line.split()[0]: line for line in lines[2:] if not line.startswith(" ")
            and line.split()[0] in TASKS}
    assert set(rows) == set(TASKS) - {LONG_ID}  # the long id is shortened, not wrapped
    [long_row] = [line for line in lines if line.startswith(LONG_ID[:12])]
    assert "…" in long_row.split()[0] and len(long_row.split()[0]) >= 12
    assert "3 min ago" in rows["hello"] and "in 56 min" in rows["hello"]
    assert "failed" in rows["cert-check"] and "disabled" in rows["cleanup-tmp"]
    invalid = [line for line in lines if ".md:" in line]
    assert len(invalid) == 2 and any("`validate`" in line for line in lines)
    assert len(lines) == 2 + len(TASKS) + 1 + 2  # title, header, tasks, invalid + 2 files


def test_list_widens_with_the_terminal_and_wide_shows_everything(realistic):
    now = "2026-11-23T10:03:00+00:00"
    wide_term = run_cli(realistic, "list", "--now", now, env={"COLUMNS": "140"}).stdout
    header = lines_of(wide_term)[1]
    assert "schedule" in header and "next at" in header
    assert "Nov 24 02:00 UTC" in wide_term  # absolute times carry their zone
    everything = run_cli(realistic, "list", "--wide", "--now", now, env=NARROW).stdout
    assert LONG_ID in everything and "command" in lines_of(everything)[1]
    assert "pg_dump app | gzip > /backup/app.sql.gz" in everything


def test_list_says_a_missed_fire_is_overdue(realistic):
    """The tick stopped after 10:00: at 11:06 hello's 11:00 fire has not run. `list` says so
    instead of showing only the next fire (12:00)."""
    out = run_cli(realistic, "list", "--now", "2026-11-23T11:06:00+00:00", env=NARROW)
    [hello] = [line for line in out.stdout.splitlines() if line.startswith("hello ")]
    assert "due 6 min ago, not run" in hello, out.stdout
    rows = json.loads(run_cli(realistic, "list", "--json", "--now",
                              "2026-11-23T11:06:00+00:00").stdout)
    by_id = {r["id"]: r for r in rows}
    assert by_id["hello"]["overdue_since"] == "2026-11-23T11:00:00+00:00"
    assert by_id["cleanup-tmp"]["overdue_since"] is None  # disabled: nothing is missed
    on_time = run_cli(realistic, "list", "--now", "2026-11-23T11:00:30+00:00", env=NARROW)
    [hello] = [line for line in on_time.stdout.splitlines() if line.startswith("hello ")]
    assert "due " not in hello and "in 59 min" in hello  # the tick claims it this minute


def test_history_is_one_line_per_run_at_80_columns(realistic):
    out = run_cli(realistic, "history", env=NARROW)
    lines = lines_of(out.stdout)
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert "UTC" in lines[0]  # the zone of the times
    runs = json.loads(run_cli(realistic, "history", "--json").stdout)
    assert len(lines) == 2 + len(runs)


def in_a_terminal(home, *args: str, columns: int = 80) -> str:
    """The CLI with a pseudo-terminal as its stdout, as in tmux."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    env.update(COLUMNS=str(columns), TERM="dumb")
    proc = subprocess.Popen([sys.executable, str(SCHEDULER), "--home", str(home), *args],
                            stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    proc.wait(timeout=60)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_doctor_and_show_fit_80_columns_in_a_terminal(realistic):
    doctor = in_a_terminal(realistic, "doctor")
    crontab = [line for line in doctor.splitlines() if line.startswith("* * * * *")]
    assert "task files" in doctor
    # a word longer than the line (a path to copy) is never broken: it gets a line of its own
    assert all(len(line) <= 80 or len(line.split()) == 1
               for line in doctor.splitlines() if line not in crontab), doctor
    show = in_a_terminal(realistic, "show", "cert-check")
    assert all(len(line) <= 80 or len(line.split()) <= 2 for line in show.splitlines()), show
    assert "last runs   #1 failed" in show


def test_show_speaks_to_people(realistic):
    out = run_cli(realistic, "show", "cert-check", env=NARROW)
    text = out.stdout
    assert out.returncode == 0, out.stderr
    assert "every day at 10:00 (0 10 * * *)" in text
    assert "tags        ops, nightly" in text and "timeout     5m" in text
    assert "('" not in text and "True" not in text and "None" not in text
    nexts = [line for line in text.splitlines() if "(in " in line]
    assert len(nexts) == 3 and all(" 10:00 UTC  (in " in line for line in nexts), text
    assert "#" in text and "failed" in text and "exit 3" in text  # the last run, its status
    assert str(realistic / "tasks" / "cert-check.md") in text
    assert "What cert-check is for." in text and "command     exit 3" in text
    shown = json.loads(run_cli(realistic, "show", "cert-check", "--json").stdout)
    assert shown["task"]["tags"] == ["ops", "nightly"] and shown["task"]["retry"] == 0
    assert len(shown["next"]) == 3  # from the real now: `show` has no --now
    assert all(t.endswith("T10:00:00+00:00") for t in shown["next"]), shown["next"]
    assert shown["state"]["not_before"] == "2026-11-23T09:58:00+00:00"
    [run] = shown["runs"]
    assert run["started_at"].startswith("2026-11-23T10:00")
    with sqlite3.connect(realistic / "state" / "mdcron.db") as db:
        [(stored,)] = db.execute("SELECT extra FROM runs WHERE id = ?", (run["run_id"],))
    assert run["extra"] == (json.loads(stored) if stored else None)  # an object, not text
    assert shown["schedule_words"] == "every day at 10:00"


UNKNOWN = [("logs", "nope"), ("history", "--task", "nope"), ("next", "nope"), ("show", "nope"),
           ("why", "nope"), ("run", "nope"), ("enable", "nope"), ("disable", "nope"),
           ("comments", "nope"), ("comment", "nope", "hi"), ("revert-heal", "nope")]


def test_an_unknown_id_is_one_message_and_exit_2_in_every_command(realistic):
    said = {}
    for args in UNKNOWN:
        out = run_cli(realistic, *args)
        said[" ".join(args)] = (out.returncode, out.stdout, out.stderr.strip())
    expected = (2, "", f"mdcron: no task with id 'nope' in {realistic / 'tasks'} (see `list`)")
    # `next` also takes an expression, and says how to write one after the same words
    assert {k: v for k, v in said.items()
            if v[:2] != expected[:2] or not v[2].startswith(expected[2])} == {}


def test_an_unknown_id_names_the_nearest(realistic):
    out = run_cli(realistic, "show", "helo")
    assert out.returncode == 2 and "did you mean 'hello'?" in out.stderr


def test_an_unknown_tag_and_bad_numbers_exit_2(realistic):
    tag = run_cli(realistic, "list", "--tag", "opz")
    assert tag.returncode == 2 and "no task has the tag 'opz'; did you mean 'ops'?" in tag.stderr
    for args in (("history", "-n", "0"), ("history", "-n", "-1"), ("next", "hello", "-n", "0"),
                 ("logs", "hello", "--run", "0"), ("logs", "hello", "--run", "x"),
                 ("resolve", "-3")):
        out = run_cli(realistic, *args)
        assert out.returncode == 2 and "expected a whole number from 1 to" in out.stderr, args


def test_every_option_has_help():
    from mdcron.cli.parser import build_parser

    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    empty = [f"{name} {a.dest}" for name, p in [("", parser), *sub.choices.items()]
             for a in p._actions if not (a.help or "").strip()]
    assert empty == []


def test_validate_files_checks_only_those(realistic, write_task):
    good = write_task("fresh", command="echo hi", schedule="0 5 * * *")
    clash = write_task("hello", command="echo again", filename="hello-copy.md")
    ok = run_cli(realistic, "validate", str(good))
    assert ok.returncode == 0 and "1 valid task(s), 0 error(s)" in ok.stdout, ok.stderr
    assert "bad-schedule" not in ok.stdout + ok.stderr  # other files are not its business
    bad = run_cli(realistic, "validate", str(realistic / "tasks" / "bad-schedule.md"))
    assert bad.returncode == 1 and "hour must be 0-23" in bad.stderr
    assert "broken-yaml" not in bad.stderr
    dup = run_cli(realistic, "validate", str(clash))
    assert dup.returncode == 1 and "duplicate id 'hello'" in dup.stderr
    missing = run_cli(realistic, "validate", str(realistic / "tasks" / "gone.md"))
    assert missing.returncode == 1 and "no such file" in missing.stderr


def complete(script: str, words: list[str], home) -> list[str]:
    """The bash completion function's answer for the words typed so far."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = (f"{script}\nCOMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1};"
               ' _mdcron; printf "%s\\n" "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30,
                         env={"PATH": os.environ["PATH"], "MDCRON_HOME": str(home)})
    assert out.returncode == 0, out.stderr
    return [w for w in out.stdout.split("\n") if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_offers_commands_options_and_ids(realistic):
    script = run_cli(realistic, "completion", "bash").stdout
    assert "complete -F _mdcron" in script
    assert complete(script, ["scheduler.py", "sh"], realistic) == ["show"]
    assert set(complete(script, ["scheduler.py", "show", "c"], realistic)) == {
        "cert-check", "cleanup-tmp"}
    assert "--wide" in complete(script, ["scheduler.py", "list", "--w"], realistic)
    assert complete(script, ["scheduler.py", "history", "--task", "fe"], realistic) == [
        "fetch-rates"]
    other = realistic.parent / "other"
    (other / "tasks").mkdir(parents=True)
    (other / "tasks" / "x.md").write_text('---\nid: "only-here"\nschedule: "@daily"\n---\n')
    assert complete(script, ["scheduler.py", "--home", str(other), "run", ""], realistic) == [
        "only-here"]
    zsh = run_cli(realistic, "completion", "zsh").stdout
    assert zsh.startswith("#compdef") and "compdef _mdcron" in zsh


def test_next_says_how_far_each_fire_is(home, write_task):
    write_task("soon", schedule="*/5 * * * *", command="true")
    lines = run_cli(home, "next", "soon", "-n", "3").stdout.splitlines()
    assert len(lines) == 3 and all(re.search(r"\(in \d+ (s|min)\)$", x) for x in lines), lines
    past = run_cli(home, "next", "0 6 * * *", "-n", "1", "--after", "2020-01-01T00:00:00+00:00")
    assert re.search(r"\(\d+ .* ago\)$", past.stdout.strip()), past.stdout


def test_a_tasks_path_that_is_a_file_is_named_by_list_and_tick_once(tmp_path):
    """`list` said "0 task(s)" with exit 0; the tick said "cannot list" and "does not exist"."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "tasks").write_text("not a folder\n", encoding="utf-8")
    listed = run_cli(home, "list")
    assert listed.returncode == 1, listed.stdout + listed.stderr
    assert "cannot list the tasks folder: Not a directory" in listed.stderr
    assert "task(s)" not in listed.stdout, listed.stdout
    ticked = run_cli(home, "tick")
    assert ticked.returncode != 0
    said = ticked.stdout + ticked.stderr
    assert said.count("cannot list the tasks folder: Not a directory") == 1, said
    assert "does not exist" not in said, said
