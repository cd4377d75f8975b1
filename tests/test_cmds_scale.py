"""Issue 27 item 4: the read-only commands at scale (10,000 tasks, 1,000,000 runs) read what a
tick left them and pay no rebuild twice; their output stays what it was."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO
from conftest import age_cache as age

from mdcron.core.clock import minute_floor
from mdcron.core.outcome import Outcome, RunResult
from mdcron.state.store import Owner, Store

NOW = minute_floor(1_795_000_000.0)
OWNER = Owner(pid=4242, start=1, boot="boot")

PROBE = """
import sys
from mdcron.cli.main import main
code = main(["--home", sys.argv[1], *sys.argv[2:]])
print("EXIT", code, "YAML", "yaml" in sys.modules, file=sys.stderr)
"""


def _cli(home, *words: str) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE, str(home), *words], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    return out.stderr.strip().splitlines()[-1]


def test_a_read_only_command_after_a_config_change_checks_it_once(home, write_task):
    """After scheduler.yaml changed, the first `list` reads it with PyYAML and keeps its key
    (state/config-checked), as a tick would: the commands after it read it without PyYAML
    (each one paid the parse until the next tick)."""
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 2\n", encoding="utf-8")
    write_task("plain", command="true")
    for minute in (0, 1):  # the first tick creates state/, the second keeps the key
        assert _cli(home, "tick", "--now", f"2026-11-23T10:0{minute}:00+00:00").startswith(
            "EXIT 0")
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 3\n", encoding="utf-8")
    checked = (home / "state" / "config-checked").read_bytes()
    assert _cli(home, "tick", "--dry-run") == "EXIT 0 YAML True"
    assert (home / "state" / "config-checked").read_bytes() == checked  # a dry run keeps none
    assert _cli(home, "list", "--json") == "EXIT 0 YAML True"  # both parsers, the key kept
    age(home)  # the task file's row trusted: a file read again would import yaml for itself
    for words in (["list", "--json"], ["list"], ["show", "plain"], ["history"],
                  ["next", "plain"]):
        assert _cli(home, *words) == "EXIT 0 YAML False", words



@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    with Store(tmp_path / "state" / "mdcron.db", url=url, host="hosta") as s:
        yield s


def test_last_run_briefs_reads_the_newest_row_of_the_ids_asked_for(store):
    """`list`'s last-run columns (issue 27: the ids it lists, not a skip-scan of every id in
    1,000,000 runs), the same on SQLite and PostgreSQL."""
    store.observe([("a", True, "/t/a.md"), ("b", True, "/t/b.md")], NOW)
    won = store.claim_slots([("a", NOW, None, "/t/a.md"), ("b", NOW, None, "/t/b.md")], NOW,
                            OWNER)
    later = store.start_run("a", scheduled_for=NOW, trigger="manual", attempt=1, kind="run",
                            now=NOW + 5, owner=OWNER, task_file=None)
    store.start_run("gone", scheduled_for=NOW, trigger="manual", attempt=1, kind="run",
                    now=NOW + 6, owner=OWNER, task_file=None)
    assert store.finish_run(later, RunResult(Outcome.FAILED, exit_code=1, duration=1.0,
                                             fail_reason="exit 1"), NOW + 7)
    briefs = store.last_run_briefs(iter(["a", "b", "never", "a"]))
    assert briefs == {"a": {"started_at": NOW + 5, "status": "failed", "host": "hosta"},
                      "b": {"started_at": NOW, "status": "running", "host": "hosta"}}
    assert store.run(won[("b", NOW)])["status"] == "running"
    assert store.last_run_briefs([]) == {}
