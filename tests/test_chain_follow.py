"""Chains follow at once (issue 27, run/chain_follow.py): a downstream starts when its
upstream's ladder ends, while a sibling of the same tick still runs. Real ticks as
subprocesses (`tick --now`), real SQLite; the order is read from the tasks' own stamps."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_cli
from conftest import age_cache as age

BEFORE = "2026-11-23T08:59:00+00:00"
NOW = "2026-11-23T09:00:00+00:00"


def _stamp(home: Path, name: str) -> float:
    return float((home / name).read_text().strip())


def test_a_downstream_starts_while_a_slow_sibling_still_runs(home, write_task):
    (home / "scheduler.yaml").write_text("timezone: UTC\nmax_parallel: 4\n")
    write_task("up", schedule="0 9 * * *", command=f"date +%s.%N > {home}/up-end")
    # slow runs until the chain's end has started and written its stamp (60 s at most): a
    # fixed 4 s left a loaded machine little time for three starts; a tick that held the
    # chain back for the round would still see slow end first
    write_task("slow", schedule="0 9 * * *",
               command=f"i=0; while [ ! -s {home}/last-start ] && [ $i -lt 1200 ];"
                       f" do sleep 0.05; i=$((i+1)); done; date +%s.%N > {home}/slow-end")
    write_task("down", schedule="after up", command=f"date +%s.%N > {home}/down-start")
    write_task("last", schedule="after down", command=f"date +%s.%N > {home}/last-start")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    done = run_cli(home, "tick", "--now", NOW)
    assert done.returncode == 0, done.stdout + done.stderr
    # the chain up → down → last ran while slow still ran, down at once after up (10 s of
    # slack for a loaded machine)
    assert _stamp(home, "down-start") < _stamp(home, "slow-end")
    assert _stamp(home, "last-start") < _stamp(home, "slow-end")
    assert _stamp(home, "down-start") - _stamp(home, "up-end") < 10
    db = sqlite3.connect(home / "state" / "mdcron.db")
    rows = db.execute("SELECT task_id, status FROM runs WHERE kind = 'run' ORDER BY task_id")
    assert sorted(rows) == [("down", "success"), ("last", "success"), ("slow", "success"),
                            ("up", "success")]
    db.close()
    again = run_cli(home, "tick", "--now", "2026-11-23T09:01:00+00:00")
    assert again.returncode == 0
    db = sqlite3.connect(home / "state" / "mdcron.db")
    assert db.execute("SELECT count(*) FROM runs").fetchone() == (4,)  # exactly once each
    db.close()


# --------------------------------------------------------------- the idle path with chains

PROBE = """
import sys
from mdcron.cli.main import main
code = main(sys.argv[1:])
print("PROBE", code, "full" if "mdcron.run.tick" in sys.modules else "idle")
"""


def probe_tick(home: Path, now: str) -> str:
    """A tick in a fresh interpreter: 'idle' (the fast path answered) or 'full'."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    out = subprocess.run([sys.executable, "-c", PROBE, "--home", str(home), "tick", "--now", now],
                         cwd=REPO, capture_output=True, text=True, env=env, timeout=60)
    last = (out.stdout.splitlines() or [""])[-1]
    assert last.startswith("PROBE 0 "), out.stdout + out.stderr
    return last.split()[-1]


def test_a_home_with_a_chain_is_idle_until_an_upstream_finishes(home, write_task):
    write_task("up", schedule="0 9 * * *", timezone="UTC", command="true")
    write_task("down", schedule="after up", command="true")
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    assert run_cli(home, "tick", "--now", NOW).returncode == 0  # up, then down
    age(home)
    probe_tick(home, "2026-11-23T09:01:00+00:00")  # a full tick may write the rows' dues
    age(home)
    assert probe_tick(home, "2026-11-23T09:02:00+00:00") == "idle"
    assert probe_tick(home, "2026-11-23T09:03:00+00:00") == "idle"
    assert run_cli(home, "run", "up", "--no-chain").returncode == 0  # an upstream finished
    assert probe_tick(home, "2026-11-23T09:04:00+00:00") == "full"
    age(home)
    assert probe_tick(home, "2026-11-23T09:05:00+00:00") == "idle"
    db = sqlite3.connect(home / "state" / "mdcron.db")
    assert db.execute("SELECT count(*) FROM runs WHERE task_id = 'down'").fetchone() == (1,)
    db.close()
