"""Fault scenarios with many cases each, for tests/faults (a few cases) and bench/faults.py
(many): each returns a Tally of cases tried, held and lost, with the first failures described."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from faultlib import (
    BEFORE,
    NOW,
    Tally,
    db_path,
    group_members,
    held_locks,
    integrity,
    kill_group_quietly,
    lines,
    lock_pgid,
    overdue_lock,
    pid_alive,
    query,
    render_task,
    run_cli,
    runs,
    start_tick,
    stop_tick_and_group,
    wait_until,
    write_tasks,
)

# --------------------------------------------------------------------------- a person's editor

EDITOR = r"""
import os, sys, time
path = sys.argv[1]
folder = os.path.dirname(path)
for line in sys.stdin:
    mode, delay, text = line.rstrip("\n").split(" ", 2)
    text = text.replace("\\n", "\n").encode()
    end = time.perf_counter() + float(delay)
    while time.perf_counter() < end:
        pass  # spin: lands the save at a chosen point of a concurrent edit
    if mode == "rename":  # how most editors save: a new file renamed over the old one
        tmp = os.path.join(folder, ".editor.tmp")
        with open(tmp, "wb") as f:
            f.write(text)
        os.rename(tmp, path)
    else:  # in place, as `cat > file` or vim with backupcopy=yes
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.write(fd, text)
        os.close(fd)
    print("saved", flush=True)
"""


class Editor:
    """A person saving a file from another process, at a chosen moment."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", EDITOR, str(path)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def save(self, text: str, mode: str = "rename", delay: float = 0.0) -> None:
        """Start saving `text` after `delay` seconds (a spin in the editor); returns at once."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{mode} {delay:.6f} {text.replace(chr(10), chr(92) + 'n')}\n")
        self.proc.stdin.flush()

    def saved(self) -> None:
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == "saved\n"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


def race_version(i: int) -> str:
    return render_task("race", body=f"Body of version {i}.\n", title=f"v{i}", command="true")


def edit_race(home: Path, trials: int, mode: str, seed: int = 1) -> Tally:
    """The scheduler writes `enabled: false` (frontmatter_edit.edit_task_file, as `disable` and
    suspension do) while a person saves the next version of the file from another process, at a
    random moment of the edit. Held: the file ends as the person's version, with or without our
    key on top. Lost: our key went onto the older version over the person's save. Anything
    else (empty, a mix) is lost too."""
    import random

    from mdcron.tasks.frontmatter_edit import EditError, edit_task_file, set_keys

    rng = random.Random(seed)
    path = home / "tasks" / "race.md"
    path.write_text(race_version(0), encoding="utf-8")
    edit_task_file(path, {"enabled": False})  # imports
    start = time.perf_counter()
    edit_task_file(path, {"enabled": None})  # how long one edit takes here
    span = (time.perf_counter() - start) * 3  # the save lands before, during or after
    tally = Tally(f"edit race ({mode})")
    editor = Editor(path)
    try:
        for i in range(1, trials + 1):
            editor.save(race_version(i - 1), mode)
            editor.saved()
            editor.save(race_version(i), mode, rng.uniform(0, span))
            try:
                edit_task_file(path, {"enabled": False})
                tally.note("edited")
            except EditError as exc:
                tally.note("refused: " + str(exc).split(":")[-1].strip()[:40])
            editor.saved()
            final = path.read_text(encoding="utf-8")
            mine = set_keys(race_version(i), {"enabled": False})
            if final == race_version(i):
                tally.note("person's save last")
            elif final == mine:
                tally.note("our key on the person's save")
            tally.case(final in (race_version(i), mine),
                       f"trial {i}: the file became {final[:200]!r}")
    finally:
        editor.close()
    return tally


def flip_version(letter: str) -> str:
    """Two versions of one task that differ in size and in every value a mix could show."""
    size = 3000 if letter == "A" else 1800
    return render_task("flip", body=(letter.lower() * 70 + "\n") * 10, title=f"version {letter}",
                       command="echo " + letter * size, timeout=30 if letter == "A" else 60)


def read_race(home: Path, trials: int, mode: str, seed: int = 2) -> Tally:
    """The tick reads a task file (taskfile.load_task_file, as the cache does) while a person
    saves the other version from another process. Held: the Task read is exactly one version,
    or (only when the editor writes in place, so the file is momentarily empty) the file gets
    an error for this tick. Lost: a Task mixing the two, or an error for a rename save."""
    import random

    from mdcron.settings.config import Config
    from mdcron.tasks.taskfile import load_task_file

    rng = random.Random(seed)
    config = Config(home=home.resolve())
    path = home / "tasks" / "flip.md"
    path.write_text(flip_version("A"), encoding="utf-8")
    load_task_file(path, config)  # imports
    start = time.perf_counter()
    load_task_file(path, config)
    span = (time.perf_counter() - start) * 1.5
    commands = {"echo " + letter * (3000 if letter == "A" else 1800): letter for letter in "AB"}
    tally = Tally(f"read race ({mode})")
    editor = Editor(path)
    try:
        for i in range(trials):
            letter = "AB"[i % 2]
            editor.save(flip_version(letter), mode, rng.uniform(0, span))
            task, problems = load_task_file(path, config)
            editor.saved()
            if task is not None:
                seen = commands.get(task.command or "")
                whole = seen is not None and task.title == f"version {seen}" and (
                    task.timeout == (30 if seen == "A" else 60))
                tally.note(f"read version {seen}" if whole else "read a mix")
                tally.case(whole, f"trial {i}: read a mix: {task!r:.300}")
            else:
                tally.note("error for the file")
                tally.case(mode == "inplace", f"trial {i}: {problems}")
    finally:
        editor.close()
    return tally


# --------------------------------------------------------------------------- scenarios
# Each returns a Tally; the tests run them with a few cases, bench/faults.py with many.


def many_ticks(home: Path, ticks: int = 20, tasks: int = 200) -> Tally:
    """`ticks` ticks started together over `tasks` due tasks: one case per (task, slot)."""
    marks = home / "marks"
    marks.mkdir(parents=True, exist_ok=True)
    (home / "tasks").mkdir(parents=True, exist_ok=True)
    ids = write_tasks(home, tasks, schedule="0 10 * * *",
                      command=f"echo $MDCRON_RUN_ID >> {marks}/{{id}}")
    run_cli(home, "tick", "--now", BEFORE)
    go = home / "go"
    procs = [start_tick(home, NOW, after=go) for _ in range(ticks)]
    go.touch()
    outs = [p.communicate(timeout=600) for p in procs]
    tally = Tally(f"{ticks} ticks at once, {tasks} due tasks")
    for p, (out, err) in zip(procs, outs, strict=True):
        if p.returncode != 0 or "locked" in out + err or "Traceback" in err:
            tally.note("a tick failed")
            tally.failures.append(f"tick exit {p.returncode}: {(out + err)[-500:]}")
    rows: dict[str, list[tuple]] = {}
    for row in query(home, "SELECT id, task_id, status FROM runs"):
        rows.setdefault(row[1], []).append(row)
    for task_id in ids:
        mine = rows.get(task_id, [])
        ran = lines(marks / task_id)
        ok = len(mine) == 1 and mine[0][2] == "success" and ran == [str(mine[0][0])]
        tally.case(ok, f"{task_id}: rows {mine}, ran as {ran}")
    if integrity(home) != "ok" or "a tick failed" in tally.notes:
        tally.lost += 1
    return tally


def _any_alive(pids: Path) -> bool:
    for p in pids.iterdir():
        text = p.read_text().strip()
        if not text or pid_alive(int(text)):
            return True  # a pid file still being written counts as alive
    return False


def kill_at_random(root: Path, trials: int, seed: int = 4) -> Tally:
    """A tick over 14 tasks (12 quick, 2 that wait for a signal file) is SIGKILLed at a random
    moment from its start to its end; then the orphans finish, a tick recovers, and a tick the
    next day runs everything. Held: database sound, no lock held, no row left running, no slot
    run twice, every run recorded (success or crashed), and the next fire runs each task once."""
    import random

    rng = random.Random(seed)
    tally = Tally("tick SIGKILLed at a random moment")
    for trial in range(trials):
        delay = rng.uniform(0.0, 1.2)
        problems = _kill_trial(root / f"kill-{trial}", delay, tally)
        tally.case(not problems, f"trial {trial} (kill after {delay:.2f} s): {problems[:3]}")
    return tally


def _kill_trial(home: Path, delay: float, tally: Tally) -> list[str]:
    (home / "tasks").mkdir(parents=True)
    marks, pids, release = home / "marks", home / "pids", home / "release"
    marks.mkdir()
    pids.mkdir()
    (home / "scheduler.yaml").write_text("max_parallel: 4\n")
    body = f"echo $$ > {pids}/{{id}}; echo x >> {marks}/{{id}}"
    ids = write_tasks(home, 12, prefix="q", schedule="0 10 * * *", command=body)
    ids += write_tasks(home, 2, prefix="s", schedule="0 10 * * *", timeout=300,
                       command=f"{body}; while [ ! -e {release} ]; do sleep 0.01; done")
    run_cli(home, "tick", "--now", BEFORE)
    tick = start_tick(home)
    try:
        tick.communicate(timeout=delay)
        tally.note("tick ended before the kill")
    except subprocess.TimeoutExpired:
        tick.send_signal(signal.SIGKILL)
        tick.communicate()
        tally.note("killed mid-tick")
    release.touch()
    wait_until(lambda: not _any_alive(pids), "orphaned tasks exited")
    run_cli(home, "tick", "--now", "2026-11-23T10:00:30+00:00")
    problems = []
    rows = query(home, "SELECT task_id, status FROM runs")
    if any(status == "running" for _, status in rows):
        problems.append(f"rows left running: {rows}")
    if held_locks(home):
        problems.append(f"locks held: {held_locks(home)}")
    if integrity(home) != "ok":
        problems.append("integrity check failed")
    by_task: dict[str, list[str]] = {}
    for task_id, status in rows:
        by_task.setdefault(task_id, []).append(status)
    before = {task_id: len(lines(marks / task_id)) for task_id in ids}
    for task_id in ids:
        ran, statuses = before[task_id], by_task.get(task_id, [])
        if ran > 1 or len(statuses) > 1:
            problems.append(f"{task_id} ran {ran} times, rows {statuses}")
        elif ran == 1 and statuses not in (["success"], ["crashed"]):
            problems.append(f"{task_id} ran but is recorded as {statuses}")
        elif statuses == ["success"] and ran != 1:
            problems.append(f"{task_id} recorded as success but never ran")
    run_cli(home, "tick", "--now", "2026-11-24T10:00:00+00:00")
    for task_id in ids:
        if len(lines(marks / task_id)) != before[task_id] + 1:
            problems.append(f"{task_id}: the next fire did not run exactly once")
    return problems


def grandchildren(root: Path, trials: int) -> Tally:
    """A task whose grandchild ignores SIGTERM, the leader waiting (timeout) or exiting first:
    afterwards no process of its group is alive."""
    tally = Tally("grandchild ignoring SIGTERM")
    for trial in range(trials):
        leader = "waits" if trial % 2 == 0 else "exits"
        tally.note(f"leader {leader}")
        alive = _grandchild_trial(root / f"gc-{trial}", leader)
        tally.case(not alive, f"trial {trial} ({leader}): still alive {alive}")
    return tally


def _grandchild_trial(home: Path, leader: str) -> list[int]:
    (home / "tasks").mkdir(parents=True)
    (home / "scheduler.yaml").write_text("kill_grace: 0.3\n")
    gc, lead = home / "grandchild", home / "leader"
    spawn = f"sh -c 'trap \"\" TERM; echo $$ > {gc}; exec sleep 300' &"
    tail = "wait" if leader == "waits" else (
        f"while [ ! -s {gc} ]; do sleep 0.01; done; exit 0")
    (home / "tasks" / "g.md").write_text(render_task(
        "g", schedule="0 10 * * *", timeout=1, command=f"echo $$ > {lead}; {spawn} {tail}"))
    run_cli(home, "tick", "--now", BEFORE)
    run_cli(home, "tick", "--now", NOW)
    pgid = int(lead.read_text())
    alive = group_members(pgid) + [p for p in [int(gc.read_text())] if pid_alive(p)]
    kill_group_quietly(pgid)
    return alive


def stale_holders(root: Path, trials: int) -> Tally:
    """A hung holder (orphaned task, or a stopped tick) of a lock older than timeout + 60 s:
    the next tick kills the whole group and records a timeout."""
    tally = Tally("stale lock holder killed")
    for trial in range(trials):
        holder = "orphan" if trial % 2 == 0 else "stopped tick"
        tally.note(holder)
        problem = _stale_trial(root / f"stale-{trial}", holder)
        tally.case(not problem, f"trial {trial} ({holder}): {problem}")
    return tally


def _stale_trial(home: Path, holder: str) -> str:
    (home / "tasks").mkdir(parents=True)
    (home / "scheduler.yaml").write_text("kill_grace: 0.3\n")
    started, gc = home / "started", home / "grandchild"
    (home / "tasks" / "h.md").write_text(render_task(
        "h", schedule="0 10 * * *", timeout=5, command=(
            f"sh -c 'trap \"\" TERM; echo $$ > {gc}; exec sleep 300' & touch {started}; wait")))
    run_cli(home, "tick", "--now", BEFORE)
    tick = start_tick(home)
    pgid = None
    try:
        wait_until(lambda: started.exists() and bool(lines(gc)) and lock_pgid(home, "h"),
                   "hung task started, its lock written")
        pgid = lock_pgid(home, "h")
        assert pgid is not None
        if holder == "orphan":
            tick.kill()
        else:
            tick.send_signal(signal.SIGSTOP)
        overdue_lock(home, "h")  # 10 min later, on the monotonic clock the lock records
        run_cli(home, "tick", "--now", "2026-11-23T10:10:00+00:00")
        rows = runs(home, "h")
        alive = group_members(pgid)
        if len(rows) != 1 or rows[0][3] != "timeout" or alive or held_locks(home):
            return f"rows {rows}, alive {alive}, locks {held_locks(home)}"
        return ""
    finally:
        stop_tick_and_group(tick, pgid)


def kill_in_write(home: Path, old_rows: int = 450_000) -> list[str]:
    """SIGKILL while the tick is inside a long write transaction (retention deleting its
    bounded share, a tenth, of `old_rows` old runs: enough dirty pages to spill into the WAL
    before the commit). Returns what went wrong: [] when the database is sound, the delete
    rolled back as a whole, every committed run kept and nothing run twice."""
    import sqlite3

    marks = home / "marks"
    marks.mkdir(parents=True)
    (home / "tasks").mkdir(parents=True, exist_ok=True)
    ids = write_tasks(home, 5, schedule="0 10 * * *", command=f"echo x >> {marks}/{{id}}")
    run_cli(home, "tick", "--now", BEFORE)
    db = sqlite3.connect(db_path(home), isolation_level=None)
    db.execute("BEGIN")
    db.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
        " INSERT INTO runs(task_id, scheduled_for, trigger, status, started_at, finished_at)"
        " SELECT 'old' || (i % 50), 1e6 + i * 60, 'schedule', 'success', 1e6 + i * 60,"
        " 1e6 + i * 60 FROM n", (old_rows,))
    db.execute("DELETE FROM meta WHERE key = 'retention_at'")  # retention is due this tick
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA busy_timeout = 0")
    wal = Path(f"{db_path(home)}-wal")

    def inside_big_write() -> bool:
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # somebody holds the write lock: the tick ...
            return wal.exists() and wal.stat().st_size > 1 << 20  # ... in the big delete
        db.execute("ROLLBACK")
        return False

    tick = start_tick(home)
    try:
        wait_until(inside_big_write, "the tick inside its retention transaction")
    finally:
        tick.send_signal(signal.SIGKILL)
        tick.communicate()
        db.close()
    problems = []
    if integrity(home) != "ok":
        problems.append("integrity check failed")
    old = query(home, "SELECT count(*) FROM runs WHERE task_id LIKE 'old%'")[0][0]
    if old != old_rows:
        problems.append(f"{old} of {old_rows} old rows left: the delete did not roll back")
    mine = sorted((r[0], r[3]) for r in runs(home) if not r[0].startswith("old"))
    if mine != [(i, "success") for i in ids]:
        problems.append(f"committed runs changed: {mine}")
    out = run_cli(home, "tick", "--now", "2026-11-23T10:00:40+00:00")
    if out.returncode != 0:
        problems.append(f"the next tick failed: {out.stderr[-500:]}")
    if held_locks(home):
        problems.append(f"locks held: {held_locks(home)}")
    if any(lines(marks / i) != ["x"] for i in ids):
        problems.append("a task ran twice")
    if integrity(home) != "ok":
        problems.append("integrity check failed after the next tick")
    return problems
