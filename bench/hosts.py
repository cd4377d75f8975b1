"""Several hosts on one PostgreSQL (issue 11): idle tick and claim throughput, SQLite beside it.

Run from the repo root:  .venv/bin/python bench/hosts.py [--runs N] [--tasks 1000] [--url URL]
bench/run.py shows the PostgreSQL rows in its own table (pg_server, claims_per_second here).

Without --url a throwaway PostgreSQL is started with pgserver (requirements-dev.txt). Prints a
table; asserts nothing. Rows:
  idle tick, N tasks      `scheduler.py tick --now <a Saturday>` over N weekday-only tasks
                          (bench/gen_tasks.py), nothing due: SQLite and PostgreSQL (both
                          the idle fast path; PostgreSQL's asks one query through libpq);
                          fresh process each run, median and min.
  claims/s, 3 hosts       3 processes (hosts a, b, c) each claim the same 20 slots x 100 tasks
                          through Store.claim_slots, one transaction per slot, all at once;
                          claims won per second of wall time (each (task, slot) won once:
                          checked).
  spread, 3 hosts         issue 23 item 9: 3 homes (hosts a, b, c, max_parallel 8) tick at
                          once over the same 300 due tasks that sleep 0.2 s; each host's share
                          of the runs (20-45 % each is the goal) and the wall time; each
                          (task, slot) ran once: checked.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
SATURDAY = "2026-11-28T12:00:00+00:00"
SLOTS, PER_SLOT, HOSTS = 20, 100, ("a", "b", "c")

CLAIMER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from mdcron.state.store import Owner, Store
url, host = sys.argv[2], sys.argv[3]
slots, per, start = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
path, first = sys.argv[7], float(sys.argv[8])
owner = Owner(pid=0, start=None, boot=None)
with Store(__import__("pathlib").Path(path), url=url or None, host=host) as store:
    store.connect()
    while time.time() < start:
        time.sleep(0.001)
    won = 0
    for s in range(slots):
        claims = [(f"t{i:04d}", first + 60 * s, None, None) for i in range(per)]
        won += len(store.claim_slots(claims, time.time(), owner))
print(won)
"""


def idle_home(root: Path, n: int, url: str | None) -> Path:
    home = root / ("pg" if url else "sqlite") / str(n)
    home.mkdir(parents=True)
    subprocess.run([sys.executable, str(BENCH / "gen_tasks.py"), str(home), str(n)], check=True)
    if url:
        (home / "scheduler.yaml").write_text(f"state_url: '{url}'\nhost: bench\n")
    return home


def time_tick(home: Path) -> float:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(REPO / "scheduler.py"), "--home", str(home),
                          "tick", "--now", SATURDAY], capture_output=True, text=True)
    took = (time.perf_counter() - t0) * 1000
    if out.returncode != 0 or out.stderr:
        raise SystemExit(f"tick failed in {home}: {out.stderr[-2000:]}")
    return took


def claims_per_second(url: str | None, root: Path, first: float = 1_800_000_000.0,
                      env: dict[str, str] | None = None) -> tuple[float, int]:
    """3 processes claim the same SLOTS x PER_SLOT (task, slot)s from `first` on at once:
    (claims won per second of wall time, claims won); SystemExit unless each is won once."""
    path = root / f"claims-{'pg' if url else 'sqlite'}.db"
    start = time.time() + 1.5  # every process connected before the gun
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, str(REPO), url or "", host,
                               str(SLOTS), str(PER_SLOT), repr(start), str(path), repr(first)],
                              env=env,
                              stdout=subprocess.PIPE, text=True)
             for host in HOSTS]
    won = sum(int(p.communicate()[0]) for p in procs)
    took = time.time() - start
    if won != SLOTS * PER_SLOT:
        raise SystemExit(f"claims: {won} won, expected exactly {SLOTS * PER_SLOT}")
    return won / took, won


SPREAD_TASKS, SPREAD_WORKERS, SPREAD_BUSY = 300, 8, 0.2
DUE, FIRST_SEEN = "2026-11-23T10:00:00+00:00", "2026-11-23T09:59:00+00:00"


def spread_home(root: Path, host: str, url: str) -> Path:
    home = root / "spread" / host
    (home / "tasks").mkdir(parents=True)
    (home / "scheduler.yaml").write_text(
        f"host: {host}\nmax_parallel: {SPREAD_WORKERS}\nstate_url: '{url}'\n")
    for i in range(SPREAD_TASKS):
        (home / "tasks" / f"s{i:03d}.md").write_text(
            f"---\nid: s{i:03d}\nschedule: '0 10 * * *'\n"
            f"command: 'sleep {SPREAD_BUSY}'\n---\n")
    return home


def spread(url: str, root: Path) -> tuple[dict[str, int], float]:
    """3 hosts tick at the same instant over SPREAD_TASKS due tasks: ({host: runs}, seconds);
    SystemExit unless every (task, slot) ran exactly once."""
    homes = [spread_home(root, host, url) for host in HOSTS]
    for home in homes:  # first seen: the 10:00 slot is due from here on
        subprocess.run([sys.executable, str(REPO / "scheduler.py"), "--home", str(home),
                        "tick", "--now", FIRST_SEEN], check=True, capture_output=True)
    t0 = time.perf_counter()
    ticks = [subprocess.Popen([sys.executable, str(REPO / "scheduler.py"), "--home", str(home),
                               "tick", "--now", DUE], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for home in homes]
    errors = [t.communicate()[1] for t in ticks]
    took = time.perf_counter() - t0
    if any(t.returncode != 0 for t in ticks):
        raise SystemExit(f"spread: a tick failed: {[e[-500:] for e in errors]}")
    out = subprocess.run([sys.executable, str(REPO / "scheduler.py"), "--home", str(homes[0]),
                          "history", "-n", "10000", "--json"], capture_output=True, text=True,
                         check=True)
    rows = json.loads(out.stdout)
    slots = {(r["task_id"], r["scheduled_for"]) for r in rows}
    if len(rows) != SPREAD_TASKS or len(slots) != SPREAD_TASKS:
        raise SystemExit(f"spread: {len(rows)} runs of {len(slots)} slots,"
                         f" expected {SPREAD_TASKS} once each")
    per_host = {host: sum(r["host"] == host for r in rows) for host in HOSTS}
    return per_host, took


@contextmanager
def pg_server(names: tuple[str, ...]) -> Iterator[list[str]]:
    """A throwaway PostgreSQL (pgserver) with an empty database per name: their URLs.
    ImportError when pgserver or psycopg is missing."""
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp())  # platformdirs warns else
    import pgserver
    import psycopg

    server = pgserver.get_server(tempfile.mkdtemp(prefix="mdcron-bench-pg-"),
                                 cleanup_mode="delete")
    try:
        url = server.get_uri()
        with psycopg.connect(url, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP DATABASE IF EXISTS {name}")
                conn.execute(f"CREATE DATABASE {name}")
        base = url.split("?")[0].rsplit("/", 1)[0]
        query = "?" + url.split("?", 1)[1] if "?" in url else ""
        yield [f"{base}/{name}{query}" for name in names]
    finally:
        server.cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--url", help="a postgresql:// URL to an empty database (default: pgserver)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mdcron-bench-hosts-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        if args.url is None:
            idle_url, claims_url, spread_url = stack.enter_context(pg_server((
                "bench_idle", "bench_claims", "bench_spread")))
        else:
            idle_url = claims_url = spread_url = args.url
        rows = []
        for backend, u in (("SQLite", None), ("PostgreSQL", idle_url)):
            home = idle_home(root, args.tasks, u)
            for _ in range(2):  # warm-up: state, parse cache, first seen
                time_tick(home)
            samples = [time_tick(home) for _ in range(args.runs)]
            rows.append((f"idle tick, {args.tasks} tasks", backend,
                         f"{statistics.median(samples):.1f} ms",
                         f"{min(samples):.1f} ms"))
        for backend, u in (("SQLite (3 processes, one file)", None),
                           ("PostgreSQL", claims_url)):
            rate, won = claims_per_second(u, root)
            rows.append((f"claims/s, 3 hosts ({won} claims)", backend, f"{rate:.0f}", ""))
        per_host, took = spread(spread_url, root)
        shares = " / ".join(f"{100 * n / SPREAD_TASKS:.0f}" for n in per_host.values())
        rows.append((f"spread, 3 hosts, {SPREAD_TASKS} due (% a / b / c)", "PostgreSQL",
                     shares, f"{took:.1f} s"))
    head = ("row", "state", "median", "min")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    for line in (head, tuple("-" * w for w in widths), *rows):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
