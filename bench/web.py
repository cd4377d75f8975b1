"""Mission Control speed (issue 10): `python3 bench/web.py` prints a table.

Against the real `scheduler.py web` (uvicorn) on 127.0.0.1, driven by httpx:
  - the Tasks page and /api/tasks at 1,000 task files, warm parse cache (goal <= 150 ms median);
  - the History page and /api/history, first page, at 100,000 runs (goal <= 100 ms median);
  - the web process's memory after all of that (VmHWM, goal <= 80 MiB).
`web_rows()` returns the rows (dicts) for bench/run.py.
"""

from __future__ import annotations

import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from gen_tasks import write_tasks  # noqa: E402

REPEAT = 25


def _start(home: Path) -> tuple[subprocess.Popen, str, str]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(REPO / "scheduler.py"), "--home", str(home),
                             "web", "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    m = re.search(r"(http://\S+?)/login\?code=\S+", line)  # the token is not printed
    if not m:
        proc.kill()
        raise RuntimeError(f"web did not start: {line!r}")
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.05)
    return proc, m.group(1), (home / "state" / "web-token").read_text().strip()


def _median_ms(client, path: str) -> float:
    client.get(path).raise_for_status()  # warm: templates, schedules, SQLite pages
    times = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        r = client.get(path)
        times.append((time.perf_counter() - t) * 1000)
        r.raise_for_status()
    return statistics.median(times)


def _fill_runs(db_path: Path, n: int, tasks: int) -> None:
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


def _rss_mib(pid: int) -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    kib = lambda k: int(fields[k].split()[0]) / 1024  # noqa: E731
    return kib("VmRSS"), kib("VmHWM")


def web_rows(tasks: int = 1000, runs: int = 100_000) -> list[dict]:
    import httpx

    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        write_tasks(str(home), tasks)
        # a real tick first, at the real time, as cron keeps it: the parse cache is warm and
        # its next-fire hints are current
        subprocess.run([sys.executable, str(REPO / "scheduler.py"), "--home", str(home), "tick"],
                       check=False,
                       stdout=subprocess.DEVNULL, env={**os.environ, "MDCRON_HOME": str(home)})
        _fill_runs(home / "state" / "mdcron.db", runs, tasks)
        proc, base, token = _start(home)
        try:
            with httpx.Client(base_url=base, timeout=60,
                              headers={"Authorization": f"Bearer {token}"}) as c:
                for name, path, goal in (
                    (f"web: Tasks page, {tasks} tasks", "/", 150),
                    (f"web: /api/tasks, {tasks} tasks", "/api/tasks", 150),
                    (f"web: History first page, {runs:,} runs", "/history", 100),
                    (f"web: /api/history, {runs:,} runs", "/api/history", 100),
                    (f"web: History filtered (status=failed), {runs:,} runs",
                     "/history?status=failed", 100),
                    ("web: Task page", "/tasks/task-00001", 150),
                ):
                    ms = _median_ms(c, path)
                    rows.append({"name": name, "value": ms, "unit": "ms", "goal": goal,
                                 "ok": ms <= goal})
            rss, hwm = _rss_mib(proc.pid)
            rows.append({"name": "web: process memory (VmHWM)", "value": hwm, "unit": "MiB",
                         "goal": 80, "ok": hwm <= 80, "note": f"RSS now {rss:.1f} MiB"})
        finally:
            proc.terminate()
            proc.wait(10)
    return rows


def print_rows(rows: list[dict]) -> None:
    print(f"{'measure':55} {'median':>10} {'goal':>8}  ok")
    for r in rows:
        print(f"{r['name']:55} {r['value']:8.1f} {r['unit']:3} {r['goal']:>5} {r['unit']:3}"
              f" {'yes' if r['ok'] else 'NO'} {r.get('note', '')}")


def main() -> int:
    rows = web_rows()
    print_rows(rows)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
