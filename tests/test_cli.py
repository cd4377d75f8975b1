"""The commands end to end through a real subprocess: a few cases each, JSON shapes, exits."""

from __future__ import annotations

import json
import sqlite3

BEFORE = "2026-11-23T09:59:00+00:00"
NOW = "2026-11-23T10:00:00+00:00"


def test_tick_then_history_and_list_json(home, write_task, cli):
    write_task("alpha", command="echo alpha", schedule="0 10 * * *", timezone="UTC",
               tags=["x"])
    write_task("beta", command="exit 3", schedule="*/5 * * * *", timezone="Europe/Riga")
    assert cli("tick", "--now", BEFORE).returncode == 0
    out = cli("tick", "--now", NOW)
    assert out.returncode == 1  # beta failed
    assert "alpha: success" in out.stdout and "beta: failed" in out.stdout
    hist = json.loads(cli("history", "--json").stdout)
    assert [h["task_id"] for h in hist] == ["beta", "alpha"]  # newest first
    for key in ("task_id", "scheduled_for", "trigger", "attempt", "kind", "started_at",
                "finished_at", "duration_ms", "status", "exit_code", "error"):
        assert key in hist[0]
    assert hist[0]["exit_code"] == 3 and hist[0]["error"] == "exit 3"
    assert hist[1]["scheduled_for"] == "2026-11-23T10:00:00+00:00"
    rows = json.loads(cli("list", "--json", "--now", NOW).stdout)
    by_id = {r["id"]: r for r in rows}
    assert by_id["alpha"]["next_run"] == "2026-11-24T10:00:00+00:00"
    assert by_id["alpha"]["last_status"] == "success" and by_id["alpha"]["valid"] is True
    assert by_id["beta"]["consecutive_failures"] == 1
    assert by_id["beta"]["timezone"] == "Europe/Riga"
    assert [r["id"] for r in json.loads(cli("list", "--json", "--tag", "x").stdout)] == ["alpha"]
    human = cli("list", "--now", NOW)
    assert human.returncode == 0 and "alpha" in human.stdout
    assert cli("history", "--task", "alpha", "-n", "5").returncode == 0


def test_list_marks_invalid_files(home, write_task, cli):
    write_task("ok", command="true")
    (home / "tasks" / "bad.md").write_text("---\nid: bad\nschedule: '* * *'\ncommand: x\n---\n")
    rows = json.loads(cli("list", "--json").stdout)
    bad = next(r for r in rows if r["file"].endswith("bad.md"))
    assert bad["valid"] is False and "schedule" in bad["problem"]


def test_duplicate_ids_exit_2_and_name_both_files(home, write_task, cli):
    write_task("same", filename="one.md", command="true")
    write_task("same", filename="two.md", command="true")
    out = cli("tick", "--now", NOW)
    assert out.returncode == 2
    assert "one.md" in out.stderr and "two.md" in out.stderr


def test_validate_reports_errors_with_file_and_line(home, write_task, cli):
    write_task("fine", command="true")
    (home / "tasks" / "typo.md").write_text(
        "---\nid: typo\nscheduel: '* * * * *'\ncommand: true\n---\n")
    out = cli("validate", "--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    problems = report["problems"]
    assert any(p["key"] == "schedule" and p["severity"] == "error" for p in problems)
    warn = next(p for p in problems if p["severity"] == "warning")
    assert "schedule" in warn["message"] and warn["line"] == 3
    (home / "tasks" / "typo.md").unlink()
    assert cli("validate").returncode == 0


def test_next_for_expression_and_task(home, write_task, cli):
    write_task("n", command="true", schedule="30 3 * * *", timezone="Europe/Riga")
    out = cli("next", "n", "-n", "2", "--after", "2026-10-24T12:00:00+03:00", "--json")
    assert json.loads(out.stdout) == ["2026-10-25T03:30:00+03:00", "2026-10-26T03:30:00+02:00"]
    out = cli("next", "0 6 * * 1-5", "--tz", "UTC", "-n", "1", "--after",
              "2026-11-21T00:00:00+00:00", "--json")
    assert json.loads(out.stdout) == ["2026-11-23T06:00:00+00:00"]
    assert cli("next", "not a schedule").returncode == 2


def test_why_explains(home, write_task, cli):
    write_task("w", command="true", schedule="0 6 * * *", timezone="UTC")
    cli("tick", "--now", "2026-11-23T15:00:00+00:00")
    out = cli("why", "w", "--at", "2026-11-23T15:30:00+00:00")
    assert out.returncode == 0
    assert "not due" in out.stdout and "next fire: 2026-11-24 06:00" in out.stdout
    out = cli("why", "w", "--at", "2026-11-24T06:00:30+00:00")
    assert "due: runs" in out.stdout
    out = cli("why", "w", "--at", "2026-11-24T09:00:00+00:00")
    assert "skipped" in out.stdout and "catchup" in out.stdout
    assert cli("why", "nope").returncode == 2


def test_run_manual_show_logs(home, write_task, cli):
    write_task("m", command="echo manual-output", schedule="0 0 1 1 *")
    out = cli("run", "m")
    assert out.returncode == 0, out.stderr
    hist = json.loads(cli("history", "--json").stdout)
    assert hist[0]["trigger"] == "manual" and hist[0]["status"] == "success"
    assert "manual-output" in cli("logs", "m").stdout
    shown = json.loads(cli("show", "m", "--json").stdout)
    assert shown["task"]["id"] == "m" and shown["runs"][0]["trigger"] == "manual"
    assert cli("run", "missing").returncode == 2


def test_disable_enable_edit_only_those_keys(home, cli):
    text = ("---\n# my nightly job\nid: e   # keep\nschedule: '0 3 * * *'  # 3 am\n"
            "command: \"echo 'hi'\"\nenabled: true\n---\n\nBody --- text\n")
    path = home / "tasks" / "e.md"
    path.write_text(text)
    assert cli("disable", "e", "--reason", "paused").returncode == 0
    disabled = path.read_text()
    assert "enabled: false" in disabled and "disabled_reason: paused" in disabled
    assert disabled.replace("enabled: false", "enabled: true").replace(
        "disabled_reason: paused\n", "") == text
    rows = json.loads(cli("list", "--json").stdout)
    assert rows[0]["enabled"] is False and rows[0]["disabled_reason"] == "paused"
    assert cli("enable", "e").returncode == 0
    assert path.read_text() == text
    db = sqlite3.connect(home / "state" / "mdcron.db")
    assert db.execute("SELECT enabled FROM task_state WHERE task_id='e'").fetchone() == (1,)


def test_bad_config_stops_with_exit_2(home, write_task, cli):
    write_task("x", command="true")
    (home / "scheduler.yaml").write_text("max_parallel: many\n")
    out = cli("tick", "--now", NOW)
    assert out.returncode == 2 and "max_parallel" in out.stderr
    assert not (home / "state").exists()


def test_web_is_joined_by_the_entry_point_and_refused_without_it(home):
    """Issue 27: cli/ never imports web/; scheduler.py joins `web` to the CLI. A caller of
    main() that did not join it gets one line, not a traceback."""
    import subprocess
    import sys

    from conftest import REPO

    code = ("import sys; from mdcron.cli.main import main;"
            f" sys.exit(main(['--home', {str(home)!r}, 'web', '--port', '1']))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert (out.returncode, out.stderr) == (2, "mdcron: `web` is started through scheduler.py\n")


def test_the_entry_point_leaves_the_collector_nothing_at_exit(home, write_task):
    """Issue 27: scheduler.py freezes what is left once its command returned (the collector's
    last passes at exit cost a one-due tick ~6 ms), after which atexit still runs and the
    command's output and exit code are as ever."""
    import subprocess
    import sys

    from conftest import REPO

    write_task("alpha", command="echo alpha", schedule="* * * * *")
    code = ("import atexit, gc, runpy, sys\n"
            "atexit.register(lambda: print('frozen:', gc.get_freeze_count() > 0))\n"
            f"sys.argv = ['scheduler.py', '--home', {str(home)!r}, 'list', '--json']\n"
            f"runpy.run_path({str(REPO / 'scheduler.py')!r}, run_name='__main__')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    rows, frozen = out.stdout.rsplit("\n", 2)[:2]
    assert json.loads(rows)[0]["id"] == "alpha"
    assert frozen == "frozen: True"
