"""Commands at scale (issue 27): 10,000 task files and 1,000,000 runs, each row beside a floor.

The home gets one real tick (state, parse cache), then 1,000,000 runs by one SQL insert, and
waits past the racy window. Floors: floor.py over the same home for `list` and `list --json`
(stat every file, read every cached row), and a fresh python reading 20 rows from the runs table
for `next`, `show` and `history` (open SQLite, one indexed query). The last row changes the
config once before its warm-up: a read-only command after a config change must not pay a
rebuild every time."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from measure import (
    PY,
    SATURDAY,
    SCHEDULER,
    Homes,
    Row,
    failure_of,
    iso,
    judge_goal,
    log,
    measure,
    ratio,
    settle,
    spawn,
    tick_argv,
    write_config,
)

GOALS_MS = {"list": 500.0, "list --json": 300.0, "next": 150.0, "show": 150.0,
            "history": 150.0}
SQL_FLOOR = ("import sqlite3, sys; db = sqlite3.connect(sys.argv[1]);"
             " db.execute('SELECT * FROM runs ORDER BY id DESC LIMIT 20').fetchall()")


def fill_runs(db_path: Path, n: int, tasks: int) -> None:
    """n finished runs spread over the tasks, one a minute back from now: one executemany."""
    db = sqlite3.connect(db_path)
    now = time.time()
    rows = ((f"task-{i % tasks:05d}", now - (n - i) * 60, "schedule", 1, "run",
             "success" if i % 17 else "failed", now - (n - i) * 60, now - (n - i) * 60 + 1,
             1000, 0 if i % 17 else 1) for i in range(n))
    db.executemany("INSERT INTO runs(task_id, scheduled_for, trigger, attempt, kind, status,"
                   " started_at, finished_at, duration_ms, exit_code) VALUES"
                   " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()


def scale_rows(homes: Homes, runs: int, n: int, n_runs: int, shared: Path | None) -> list[Row]:
    home = homes.make(f"scale-{n}", n)
    write_config(home)
    settle(home)
    s = spawn(tick_argv(home, SATURDAY), home)
    if failure_of(s):
        log(f"  !!! state-creating tick failed: {failure_of(s)}")
    log(f"inserting {n_runs:,} runs")
    fill_runs(home / "state" / "mdcron.db", n_runs, n)
    one = f"task-{n // 2:05d}"
    rows: list[Row] = []
    floor_list: Row | None = None
    floor_py = shared / "floor.py" if shared else None
    if floor_py is not None and floor_py.exists():
        log(f"floor.py N={n} (scale home)")
        floor_list = measure(Row("floor.py (list floor)", n), runs,
                             lambda i: [PY, str(floor_py), str(home)], home)
        rows.append(floor_list)
    log("floor: python + one SQLite query")
    floor_sql = measure(Row("floor: python + one SQLite query", n_runs), runs,
                        lambda i: [PY, "-c", SQL_FLOOR, str(home / "state" / "mdcron.db")], home)
    rows.append(floor_sql)

    def cli(*words: str) -> list[str]:
        return [PY, str(SCHEDULER), "--home", str(home), *words]

    now = ["--now", iso(SATURDAY)]
    cases = [("list", cli("list", *now), floor_list),
             ("list --json", cli("list", "--json", *now), floor_list),
             ("next", cli("next", one, "--after", iso(SATURDAY)), floor_sql),
             ("show", cli("show", one), floor_sql),
             ("history", cli("history"), floor_sql)]
    for name, argv, floor in cases:
        log(f"{name} N={n}, {n_runs:,} runs")
        row = measure(Row(f"{name}" + (f" {one}" if name in ("next", "show") else ""), n,
                          goal=f"≤ {GOALS_MS[name]:g} ms"), runs, lambda i, a=argv: a, home)
        row.xfloor = ratio(row.median, floor.median if floor else None)
        judge_goal(row, GOALS_MS[name])
        rows.append(row)
    # a config change: the first read-only command may rebuild (warm-up), the next ones must not
    write_config(home, "catchup: 2h\n")
    settle(home)
    log(f"list --json after a config change N={n}")
    row = measure(Row("list --json, config changed before", n,
                      goal=f"≤ {GOALS_MS['list --json']:g} ms"), runs,
                  lambda i: cli("list", "--json", *now), home)
    row.xfloor = ratio(row.median, floor_list.median if floor_list else None)
    judge_goal(row, GOALS_MS["list --json"])
    rows.append(row)
    return rows
