"""Property: random chains and resource sets, ticked by concurrent real tick processes, never run
a (task, slot) twice. Each task appends its run id to a file; the rows say which slot each run
was for."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter

from conftest import SCHEDULER, render_task
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st


@st.composite
def setups(draw):
    n = draw(st.integers(2, 5))
    tasks = []
    for i in range(n):
        ups = draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
        tasks.append({
            "after": [f"t{j}" for j in ups],
            "uses": draw(st.lists(st.sampled_from(["one", "two"]), max_size=2, unique=True)),
            "on_busy": draw(st.sampled_from(["wait", "skip", "run"])),
            "fails": draw(st.booleans()) and draw(st.booleans()),  # about 1 in 4
        })
    minutes = draw(st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True))
    return tasks, sorted(minutes)


def _tick(home, minute):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    return subprocess.Popen(
        [sys.executable, str(SCHEDULER), "--home", str(home), "tick", "--now",
         f"2026-11-23T09:{minute:02d}:00+00:00"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def _task(after: list[str], uses: list[str], on_busy: str, fails: bool = False) -> dict:
    return {"after": after, "uses": uses, "on_busy": on_busy, "fails": fails}


# The shapes that matter most, tried on every run before the drawn ones: a diamond whose
# branches contend for the one-unit resource (one of them failing), across three minutes; two
# roots racing for that unit, a join after both, and a catch-up minute.
DIAMOND = ([_task([], ["one"], "wait"), _task(["t0"], ["one", "two"], "wait"),
            _task(["t0"], ["one"], "skip", fails=True), _task(["t1", "t2"], ["two"], "run")],
           [0, 2, 4])
RACE = ([_task([], ["one"], "skip", fails=True), _task([], ["one"], "wait"),
         _task(["t0", "t1"], [], "run")], [1, 5])


# Each example costs about 1.5 s of CPU (ten-odd real tick processes); the profile in conftest.py
# draws the same examples on every run, so these 22 are what CI checks each time.
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(setup=DIAMOND)
@example(setup=RACE)
@given(setup=setups())
def test_random_chains_and_resources_never_run_a_slot_twice(tmp_path_factory, setup):
    tasks, minutes = setup
    home = tmp_path_factory.mktemp("home")
    (home / "tasks").mkdir()
    (home / "scheduler.yaml").write_text("resources: {one: 1, two: 2}\ntimezone: UTC\n")
    log = home / "ran.log"
    for i, t in enumerate(tasks):
        keys = {"uses": t["uses"], "on_busy": t["on_busy"], "busy_wait": "1s"}
        if t["after"]:
            keys.update(schedule="after", after=t["after"])
        else:
            keys["schedule"] = "*/2 * * * *"
        command = f'echo "$MDCRON_RUN_ID" >> {log}; sleep 0.05' + ("; exit 1" if t["fails"]
                                                                    else "")
        (home / "tasks" / f"t{i}.md").write_text(render_task(f"t{i}", command=command, **keys))
    subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), "tick", "--now",
                    "2026-11-23T08:59:00+00:00"], capture_output=True, check=False)
    for minute in minutes:
        procs = [_tick(home, minute) for _ in range(3)]  # three ticks at once
        for p in procs:
            p.wait(timeout=120)
    ran = Counter(log.read_text().split()) if log.exists() else Counter()
    assert all(n == 1 for n in ran.values()), ran  # no run id twice
    db = sqlite3.connect(home / "state" / "mdcron.db")
    kinds = {str(r[0]): (r[1], r[2], r[3]) for r in db.execute(
        "SELECT id, task_id, scheduled_for, kind FROM runs")}
    db.close()
    firsts = Counter((kinds[rid][0], kinds[rid][1]) for rid in ran if kinds[rid][2] == "run")
    assert all(n == 1 for n in firsts.values()), firsts  # no (task, slot) run twice
