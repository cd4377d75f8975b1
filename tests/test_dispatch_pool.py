"""run/dispatch.run_all's pool (issue 27): what the tick does meanwhile waits until the
first round of processes has started, and the GIL is handed over quickly until then.
Real task files, a real SQLite state, real processes and locks."""

from __future__ import annotations

import os
import sys
import threading
import time

from mdcron.core.clock import Clock, to_dt
from mdcron.run.attempt import RunContext, current_owner
from mdcron.run.dispatch import SWITCH_S, run_all
from mdcron.run.locks import lock_path, read_info
from mdcron.settings.config import load_config
from mdcron.state.store import state_store
from mdcron.tasks.taskfile import load_task_file

NOW = 1_800_000_000.0


def test_meanwhile_waits_for_the_first_round_to_start_and_the_gil_is_handed_over_quickly(
        home, write_task):
    (home / "scheduler.yaml").write_text("max_parallel: 3\n", encoding="utf-8")
    ids = ["a", "b", "c", "d"]
    for task_id in ids:
        write_task(task_id, command="sleep 0.5")
    config, _ = load_config(home)
    tasks = [load_task_file(home / "tasks" / f"{i}.md", config)[0] for i in ids]
    owner = current_owner()
    with state_store(config) as store:
        won = store.claim_slots([(t.id, NOW, None, str(t.path)) for t in tasks], NOW, owner)
    to_run = [(t, won[(t.id, NOW)]) for t in tasks]
    seen: dict[str, object] = {}

    def meanwhile() -> None:  # what the first round's locks say when it runs
        seen["interval"] = sys.getswitchinterval()
        seen["groups"] = {
            i: (info.pgid if (info := read_info(lock_path(config.locks_dir, i))) else None)
            for i in ids}

    intervals, done = [], threading.Event()

    def watch() -> None:  # the switch intervals seen while the pool runs
        while not done.is_set():
            intervals.append(sys.getswitchinterval())
            time.sleep(0.001)

    before = sys.getswitchinterval()
    watcher = threading.Thread(target=watch)
    watcher.start()
    ctx = RunContext(config, Clock(to_dt(NOW)), owner, dict(os.environ))
    try:
        outcomes = run_all(ctx, to_run, print, None, meanwhile=meanwhile)
    finally:
        done.set()
        watcher.join(5)
    assert [o.final.ok for o in outcomes] == [True] * 4
    started = [i for i, pgid in seen["groups"].items() if pgid]
    assert len(started) >= 3  # the first round (3 workers) named its process groups
    assert min(intervals) == SWITCH_S  # quick hand-overs while the first round started
    assert seen["interval"] == before  # and the usual ones after it
    assert sys.getswitchinterval() == before
