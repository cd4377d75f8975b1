"""Issue 23 item 9: due work spreads over the hosts of one PostgreSQL state. Each host claims
only what its free workers can start, in its own (rendezvous) order, and claims the next
unclaimed slot as a worker frees up: every slot still runs exactly once, on some live host."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from conftest import render_task, run_cli
from test_hosts import each_slot_once, start_tick

from mdcron.run.dispatch import Planned
from mdcron.run.spread import rendezvous

BEFORE = "2026-11-23T09:59:00+00:00"
NOW = "2026-11-23T10:00:00+00:00"
TASKS = 84
WORKERS = 4
BUSY = 1.2  # seconds each task keeps its worker: the hosts' workers are busy in turn


def spread_home(root: Path, name: str, state_url: str, marks: Path) -> Path:
    home = root / name
    (home / "tasks").mkdir(parents=True)
    (home / "scheduler.yaml").write_text(
        f"host: {name}\nmax_parallel: {WORKERS}\nstate_url: '{state_url}'\n", encoding="utf-8")
    for i in range(TASKS):
        task_id = f"t{i:03d}"
        command = f"echo {name} $MDCRON_RUN_ID >> {marks}/{task_id}; sleep {BUSY}"
        (home / "tasks" / f"{task_id}.md").write_text(
            render_task(task_id, schedule="0 10 * * *", command=command), encoding="utf-8")
    return home


def test_due_work_spreads_over_hosts_each_slot_once(pg_url, tmp_path):
    """3 hosts tick at the same instant over 84 due tasks with 4 workers each: every host runs
    a real share (>= 15 %), every (task, slot) runs exactly once, none is left unclaimed."""
    names = ["a", "b", "c"]
    marks = tmp_path / "marks"
    marks.mkdir()
    homes = [spread_home(tmp_path, name, pg_url, marks) for name in names]
    for home in homes:  # first seen: the 10:00 slot is due from here on
        out = run_cli(home, "tick", "--now", BEFORE)
        assert out.returncode == 0, out.stderr
    started = time.monotonic()
    ticks = [start_tick(home, NOW) for home in homes]
    outs = [t.communicate(timeout=600) for t in ticks]
    took = time.monotonic() - started
    assert all(t.returncode == 0 for t in ticks), [o[1][-2000:] for o in outs]
    ran = {p.name: p.read_text().split("\n")[:-1] for p in marks.iterdir()}
    assert [f"t{i:03d}" for i in range(TASKS) if f"t{i:03d}" not in ran] == []
    assert {task: lines for task, lines in ran.items() if len(lines) != 1} == {}
    by_id = each_slot_once(homes[0], ran, TASKS)
    per_host = Counter(by_id.values())
    print(f"\nspread over 3 hosts: {dict(per_host)} of {TASKS} in {took:.1f} s")
    assert all(per_host[name] >= 0.15 * TASKS for name in names), dict(per_host)


def test_each_host_walks_the_due_runs_in_an_order_of_its_own():
    planned = [Planned(_Task(f"t{i:03d}"), "run", 0.0, "") for i in range(50)]  # type: ignore[arg-type]
    orders = {host: [p.task.id for p in rendezvous(host, planned)] for host in "abc"}
    assert all(sorted(order) == sorted(orders["a"]) for order in orders.values())
    assert len({tuple(order[:WORKERS]) for order in orders.values()}) == 3
    assert orders["a"] == [p.task.id for p in rendezvous("a", list(reversed(planned)))]


class _Task:
    def __init__(self, task_id: str):
        self.id = task_id
