"""Mission Control speed (issue 10): `python3 bench/web.py` prints a table.

Against the real `scheduler.py web` (uvicorn) on 127.0.0.1, driven by httpx:
  - every page (Tasks, Task, Run, History, Incidents, Upcoming 24 h and 7 days, Health) and
    its /api/ twin at 1,000 task files and 100,000 runs, warm (issue 24: goal <= 100 ms median
    each; warm = a first request was answered, so per-process caches hold what did not change);
  - the server's memory (VmHWM) under 1,000 concurrent requests (goal <= 80 MiB);
  - a `tick` beside 1,000 concurrent requests against the same tick alone (goal <= 1.5x).
`web_rows()` returns the rows (dicts) for bench/run.py.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from gen_tasks import write_tasks  # noqa: E402
from scale import fill_runs  # noqa: E402

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


def _rss_mib(pid: int) -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    kib = lambda k: int(fields[k].split()[0]) / 1024  # noqa: E731
    return kib("VmRSS"), kib("VmHWM")


CROWD = 1000


async def _crowd(base: str, token: str, runs: int) -> tuple[float, int]:
    """CROWD requests at once (Run pages, Task pages, the stylesheet): (seconds, failures)."""
    import asyncio

    import httpx

    paths = [(f"/runs/{1 + (i * 97) % runs}", f"/tasks/task-{i % 1000:05d}",
              "/static/style.css")[i % 3] for i in range(CROWD)]
    limits = httpx.Limits(max_connections=CROWD, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits,
                                 headers={"Authorization": f"Bearer {token}"}) as c:
        async def one(path: str) -> bool:
            try:
                return (await c.get(path)).status_code == 200
            except httpx.HTTPError:
                return False
        t = time.perf_counter()
        ok = await asyncio.gather(*(one(p) for p in paths))
        return time.perf_counter() - t, ok.count(False)


def _tick_s(home: Path) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, str(REPO / "scheduler.py"), "--home", str(home), "tick"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "MDCRON_HOME": str(home)})
    return time.perf_counter() - t


def _crowd_rows(home: Path, pid: int, base: str, token: str, runs: int) -> list[dict]:
    """Memory under a crowd, and a tick beside one against the same tick alone."""
    import asyncio
    import threading

    alone = statistics.median(_tick_s(home) for _ in range(3))
    result: dict = {}
    crowd = threading.Thread(target=lambda: result.update(
        r=asyncio.run(_crowd(base, token, runs))))
    crowd.start()
    time.sleep(0.5)  # the crowd is in: the server holds its 1,000 connections
    ticks = []
    while crowd.is_alive() and len(ticks) < 3:  # ticks while the crowd is being answered
        ticks.append(_tick_s(home))
    beside = statistics.median(ticks) if ticks else alone
    crowd.join()
    seconds, failed = result["r"]
    rss, hwm = _rss_mib(pid)
    return [
        {"name": f"web: memory under {CROWD} concurrent requests (VmHWM)", "value": hwm,
         "unit": "MiB", "goal": 80, "ok": hwm <= 80,
         "note": f"RSS now {rss:.1f} MiB; {CROWD} answered in {seconds:.1f} s,"
                 f" {failed} failed"},
        {"name": f"web: tick beside {CROWD} requests / alone", "value": beside / alone,
         "unit": "x", "goal": 1.5, "ok": beside / alone <= 1.5,
         "note": f"{beside * 1000:.0f} ms vs {alone * 1000:.0f} ms alone (medians;"
                 f" {len(ticks)} beside)"},
    ]


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
        fill_runs(home / "state" / "mdcron.db", runs, tasks)
        proc, base, token = _start(home)
        try:
            with httpx.Client(base_url=base, timeout=60,
                              headers={"Authorization": f"Bearer {token}"}) as c:
                for name, path, goal in (
                    (f"web: Tasks page, {tasks} tasks", "/", 100),
                    (f"web: /api/tasks, {tasks} tasks", "/api/tasks", 100),
                    (f"web: History first page, {runs:,} runs", "/history", 100),
                    (f"web: /api/history, {runs:,} runs", "/api/history", 100),
                    (f"web: History filtered (status=failed), {runs:,} runs",
                     "/history?status=failed", 100),
                    ("web: Task page", "/tasks/task-00001", 100),
                    ("web: Run page", f"/runs/{runs // 2}", 100),
                    ("web: Incidents page", "/incidents", 100),
                    ("web: Upcoming 24 h", "/upcoming", 100),
                    ("web: Upcoming 7 days", "/upcoming?days=7", 100),
                    ("web: /api/upcoming 7 days", "/api/upcoming?days=7", 100),
                    ("web: Health page", "/health", 100),
                    ("web: /api/health", "/api/health", 100),
                ):
                    ms = _median_ms(c, path)
                    rows.append({"name": name, "value": ms, "unit": "ms", "goal": goal,
                                 "ok": ms <= goal})
            rows.extend(_crowd_rows(home, proc.pid, base, token, runs))
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
