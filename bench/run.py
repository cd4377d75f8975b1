"""mdcron benchmark harness: every measurement is a fresh process, timed from spawn to exit.

Run from the repo root:  .venv/bin/python bench/run.py [--runs N] [--sizes 1000,10000]
                                         [--shared DIR] [--quick] [--json FILE] [--no-pg]
See bench/README.md for what each row means and how to read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import measure as core
from measure import (
    PY,
    REPO,
    SATURDAY,
    SCHEDULER,
    Homes,
    Row,
    Sample,
    first_line,
    iso,
    judge_time,
    log,
    measure,
    minute,
    settle,
    spawn,
    tick_argv,
    write_config,
    write_task,
)
from measure import failure_of as failure_of
from measure import ratio as _ratio

NAIVE_GOAL = {1000: 7.0, 10000: 20.0}  # tick must be at least this many times faster than naive
FLOOR_GOAL = 2.0  # tick median <= 2 x floor.py median
RSS_GOAL_MIB = 25.0
ONE_DUE_GOAL_MS = 85.0
DISPATCH_GOAL_MS = 60.0  # issue 27 item 2: one due task under cron <= 60 ms
HUNDRED_DUE_GOAL_MS = 400.0
HEARTBEAT_GOAL = 1.3  # idle tick with heartbeat_url <= 1.3 x the idle tick without it
LIST_GOAL_MS = 400.0
PING_DEADLINE_MS = 5000.0  # issue 26: a task's ping (run/pings.py DEADLINE)
PG_IDLE_GOAL = 3.0  # issue 11: the idle tick on PostgreSQL <= 3 x the SQLite idle tick
CLAIMS_GOAL = 500.0  # issue 11: (task, slot) claims per second across 3 hosts
GOAL_N = 1000  # the fixed-size scenarios (one due, dispatch, list) are specified at 1,000 tasks

# --------------------------------------------------------------------------- scenarios


# --only: the groups of rows, each run or skipped whole (a group's floors come with it)
GROUPS = ("idle", "heartbeat", "one-due", "dispatch", "hundred", "pings", "list", "chain",
          "scale", "daemon", "pg")


def run_all(args: argparse.Namespace, root: Path, shared: Path | None) -> list[Row]:
    homes = Homes(root, shared)
    want = args.only.__contains__
    runs = args.runs
    base_n = args.base_n
    rows: list[Row] = []
    floors: dict[int, Row] = {}
    naives: dict[int, Row] = {}
    tick_homes: dict[int, Path] = {}

    log("interpreter alone")
    rows.append(measure(Row("interpreter alone (python -c pass)", None),
                        runs, lambda i: [PY, "-c", "pass"], root))

    for n in args.sizes if want("idle") else ():
        home = homes.make(f"idle-{n}", n)
        tick_homes[n] = home
        settle(home)  # steady state: files older than the cache's racy window
        for name, script, store in (("floor.py", "floor.py", floors),
                                    ("naive_tick.py", "naive_tick.py", naives)):
            row = Row(name, n)
            path = shared / script if shared else None
            if path is None or not path.exists():
                row.skipped = f"{script} not found (shared folder missing)"
            else:
                log(f"{name} N={n}")
                # warm-up creates floor.db / naive.db, as the tick's warm-up creates its state
                measure(row, runs, lambda i, p=path, h=home: [PY, str(p), str(h)], home)
                store[n] = row
            rows.append(row)

        log(f"tick N={n} nothing due")
        row = measure(Row("tick, nothing due", n), runs,
                      lambda i, h=home: tick_argv(h, SATURDAY), home,
                      after=lambda i, s: _no_runs(s))
        judge_idle_tick(row, floors.get(n), naives.get(n))
        rows.append(row)
        mem = Row("peak RSS of that tick", n, goal=f"≤ {RSS_GOAL_MIB:g} MiB", rss_only=True,
                  samples=row.samples, failures=row.failures)
        rows.append(mem)

    if want("heartbeat"):
        rows.append(heartbeat_row(homes, runs, base_n, rows))
    if want("one-due"):
        rows.append(one_due_row(homes, runs, base_n, floors, naives))
    if want("dispatch"):
        rows.extend(dispatch_rows(homes, runs, base_n, root))
    if want("hundred"):
        rows.append(hundred_row(homes, runs))
    if want("pings"):
        rows.extend(ping_rows(homes, runs, base_n, rows))
    if want("list"):
        rows.append(list_row(homes, runs, base_n, tick_homes))

    from latency import chain_rows, daemon_rows

    if want("chain"):
        rows.extend(chain_rows(homes, runs))
    if args.scale and want("scale"):
        from scale import scale_rows

        rows.extend(scale_rows(homes, runs, args.scale, args.scale_runs, shared))
    if args.boundaries and want("daemon"):
        rows.extend(daemon_rows(homes, args.boundaries, base_n))
    if not args.no_pg and want("pg"):
        rows.extend(pg_rows(homes, runs, base_n, rows))

    for row in rows:
        if row.rss_only:
            judge_rss(row)
    return rows


def heartbeat_row(homes: Homes, runs: int, base_n: int, rows: list[Row]) -> Row:
    """The idle tick with heartbeat_url: pings a sink on 127.0.0.1 served by this process."""
    log(f"tick N={base_n} nothing due, heartbeat_url set")
    home = homes.make(f"heartbeat-{base_n}", base_n)
    with Sink() as sink:
        (home / "scheduler.yaml").write_text(f"heartbeat_url: {sink.url}\n", encoding="utf-8")
        settle(home)
        row = measure(Row("tick, nothing due, heartbeat_url set", base_n), runs,
                      lambda i, h=home: tick_argv(h, SATURDAY), home,
                      after=lambda i, s: _no_runs(s) or sink.take())
    idle = next((r for r in rows if r.scenario == "tick, nothing due" and r.n == base_n), None)
    judge_ratio(row, idle, HEARTBEAT_GOAL)
    return row


def one_due_row(homes: Homes, runs: int, base_n: int, floors: dict[int, Row],
                naives: dict[int, Row]) -> Row:
    """base_n idle tasks + one `true` every minute."""
    log(f"tick N={base_n} one due")
    home = homes.make(f"one-due-{base_n}", base_n)
    write_config(home)
    write_task(home, "bench-due", "true")
    settle(home)
    row = measure(Row("tick, one due (true)", base_n, goal=f"≤ {ONE_DUE_GOAL_MS:g} ms"), runs,
                  lambda i, h=home: tick_argv(h, minute(i)), home, warmups=2,
                  after=lambda i, s: _mentions(s, ["bench-due"]))
    if base_n in floors:
        row.xfloor = _ratio(row.median, floors[base_n].median)
    if base_n in naives:
        row.xnaive = _ratio(naives[base_n].median, row.median)
    judge_time(row, ONE_DUE_GOAL_MS, GOAL_N)
    return row


def dispatch_rows(homes: Homes, runs: int, base_n: int, root: Path) -> list[Row]:
    """Tick start -> the due task's process writes its own start time, and its floor."""
    log(f"dispatch latency N={base_n}")
    home = homes.make(f"dispatch-{base_n}", base_n)
    started = home / "started"
    write_config(home)
    write_task(home, "bench-dispatch", f"date +%s.%N > {started}")
    settle(home)

    def clear(i: int) -> None:
        started.unlink(missing_ok=True)

    def latency(i: int, s: Sample) -> str | None:
        try:
            stamp = float(started.read_text().strip())
        except (OSError, ValueError) as exc:
            return f"the due task did not record its start ({exc})"
        s.metric_ms = (stamp - s.epoch) * 1000.0
        if s.metric_ms < 0:
            return f"start stamp precedes the tick ({s.metric_ms:.1f} ms): stale file?"
        return None

    from latency import dispatch_floor

    floor = dispatch_floor(root, runs)
    row = measure(Row("dispatch latency (tick start → task start)", base_n,
                      goal=f"≤ {DISPATCH_GOAL_MS:g} ms"), runs,
                  lambda i, h=home: tick_argv(h, minute(i)), home, warmups=2, before=clear,
                  after=latency)
    missing = [s for s in row.samples if s.metric_ms is None]
    if missing:
        row.failures.append(f"{len(missing)} run(s) without a start stamp: latency unknown")
        row.samples = [s for s in row.samples if s.metric_ms is not None]
    judge_time(row, DISPATCH_GOAL_MS, GOAL_N)
    row.xfloor = _ratio(row.median, floor.median)
    return [floor, row]


def hundred_row(homes: Homes, runs: int) -> Row:
    """100 due in the same minute, max_parallel: 8."""
    log("tick 100 due, max_parallel 8")
    home = homes.make("hundred-due", 0)
    (home / "scheduler.yaml").write_text("max_parallel: 8\n", encoding="utf-8")
    ids = [f"due-{k:03d}" for k in range(100)]
    for task_id in ids:
        write_task(home, task_id, "true")
    settle(home)
    row = measure(Row("tick, 100 due (true), max_parallel 8", 100,
                      goal=f"≤ {HUNDRED_DUE_GOAL_MS:g} ms"), runs,
                  lambda i, h=home: tick_argv(h, minute(i)), home, warmups=2,
                  after=lambda i, s: _mentions(s, ids))
    judge_time(row, HUNDRED_DUE_GOAL_MS, 100)
    return row


def list_row(homes: Homes, runs: int, base_n: int, tick_homes: dict[int, Path]) -> Row:
    """list --json over base_n tasks with state (reuses the idle home when there is one)."""
    log(f"list --json N={base_n}")
    home = tick_homes.get(base_n)
    if home is None:
        home = homes.make(f"list-{base_n}", base_n)
        s = spawn(tick_argv(home, SATURDAY), home)  # creates state, as in real use
        if failure_of(s):
            log(f"  !!! state-creating tick for list failed: {failure_of(s)}")
    row = measure(Row("list --json", base_n, goal=f"≤ {LIST_GOAL_MS:g} ms"), runs,
                  lambda i, h=home: [PY, str(SCHEDULER), "--home", str(h), "list", "--json",
                                     "--now", iso(SATURDAY)], home)
    judge_time(row, LIST_GOAL_MS, GOAL_N)
    return row


def ping_rows(homes: Homes, runs: int, base_n: int, rows: list[Row]) -> list[Row]:
    """Issue 26: base_n tasks of which 100 have ping_url (a sink on 127.0.0.1; for ping-000 a
    port that never answers). Nothing due: as the idle tick. Then ping-000 and ping-001 are
    due every minute: the tick ends within the one-due goal plus the pings' deadline (5 s,
    run/pings.py), never later, and the sink gets ping-001's /start and end."""
    out = []
    home = homes.make(f"pings-{base_n}", max(0, base_n - 100))
    with Sink() as sink, Silent() as silent:
        def write(k: int, schedule: str) -> None:
            url = silent.url if k == 0 else f"{sink.url}/{k}"
            (home / "tasks" / f"ping-{k:03d}.md").write_text(
                f"---\nid: ping-{k:03d}\nschedule: \"{schedule}\"\nping_url: {url}\n"
                "command: 'echo bench'\n---\n", encoding="utf-8")

        for k in range(100):  # weekday mornings: not due on the bench's Saturday
            write(k, "0 6 * * 1-5")
        settle(home)  # steady state: runs 1-3 re-read the files just written (~0.9 s) else
        log(f"tick N={base_n} nothing due, 100 with ping_url")
        row = measure(Row("tick, nothing due, 100 with ping_url", base_n), runs,
                      lambda i, h=home: tick_argv(h, SATURDAY), home,
                      after=lambda i, s: _no_runs(s) or sink.take(0))
        idle = next((r for r in rows if r.scenario == "tick, nothing due" and r.n == base_n),
                    None)
        judge_ratio(row, idle, HEARTBEAT_GOAL)
        out.append(row)
        write(0, "* * * * *")
        write(1, "* * * * *")
        settle(home)
        log(f"tick N={base_n} 100 with ping_url, 2 due, one endpoint never answers")
        goal = ONE_DUE_GOAL_MS + PING_DEADLINE_MS
        row = measure(Row("tick, 100 with ping_url, 2 due, 1 endpoint silent", base_n,
                          goal=f"≤ {goal:g} ms"), runs,
                      lambda i, h=home: tick_argv(h, minute(i)), home,
                      after=lambda i, s: (_mentions(s, ["ping-000", "ping-001"])
                                          or sink.take(2)))
        judge_time(row, goal, GOAL_N)
        out.append(row)
    return out


def pg_rows(homes: Homes, runs: int, base_n: int, rows: list[Row]) -> list[Row]:
    """Issue 11, several hosts on one PostgreSQL (a throwaway server from pgserver, as the
    tests start it): the idle tick with a PostgreSQL state beside the SQLite one, and claims
    per second when 3 hosts claim the same (task, slot)s at once (bench/hosts.py)."""
    idle = Row("tick, nothing due, PostgreSQL state", base_n,
               goal=f"≤ {PG_IDLE_GOAL:g}× the idle tick")
    claims = Row("claims, 3 hosts at once, PostgreSQL", 2000, goal=f"≥ {CLAIMS_GOAL:g}/s",
                 no_rss=True)
    try:
        from hosts import claims_per_second, pg_server

        server = pg_server(("bench_idle", "bench_claims"))
        idle_url, claims_url = server.__enter__()
    except Exception as exc:  # ImportError, or no PostgreSQL binaries for this machine
        why = (f"no PostgreSQL ({type(exc).__name__}: {exc}); pip install -r"
               " requirements-dev.txt (pgserver, psycopg), or --no-pg")
        idle.skipped = claims.skipped = why[:200]
        return [idle, claims]
    try:
        log(f"tick N={base_n} nothing due, PostgreSQL state")
        home = homes.make(f"pg-idle-{base_n}", base_n)
        (home / "scheduler.yaml").write_text(f"state_url: '{idle_url}'\nhost: bench\n",
                                             encoding="utf-8")
        spawn(tick_argv(home, SATURDAY), home)  # first seen; the warm-up mirrors the state
        measure(idle, runs, lambda i, h=home: tick_argv(h, SATURDAY), home,
                after=lambda i, s: _no_runs(s))
        base = next((r for r in rows if r.scenario == "tick, nothing due" and r.n == base_n),
                    None)
        judge_ratio(idle, base, PG_IDLE_GOAL)
        log("claims, 3 hosts at once, PostgreSQL")
        for i in range(runs):
            t0 = time.time()
            rate, won = claims_per_second(claims_url, homes.root,
                                          first=1_800_000_000.0 + 86400.0 * i, env=core.CHILD_ENV)
            claims.samples.append(Sample(wall_ms=won / rate * 1000.0, rss_kib=0, rc=0,
                                         stdout="", stderr="", epoch=t0))
            log(f"  claims run {i + 1}/{runs}: {rate:.0f}/s")
        # type: ignore[operator]
        rate = claims.n / (claims.median / 1000.0) if claims.median else 0.0
        claims.verdict = f"{'meets' if rate >= CLAIMS_GOAL else 'misses'}: {rate:.0f}/s"
    except SystemExit as exc:  # a claim won twice or never: the row failed
        claims.failures.append(str(exc))
    finally:
        server.__exit__(None, None, None)
    return [idle, claims]


def _no_runs(s: Sample) -> str | None:
    """A nothing-due tick should print nothing about runs; flag output that suggests one ran."""
    text = s.stdout.lower()
    if any(word in text for word in ("success", "failed", "skipped slot")):
        return f"expected nothing due, tick said: {first_line(s.stdout)}"
    return None


def _mentions(s: Sample, ids: list[str]) -> str | None:
    missing = [t for t in ids if t not in s.stdout]
    if missing:
        return (f"{len(missing)} due task(s) not mentioned in tick output (did they run?), "
                f"e.g. {missing[0]}")
    return None


class Sink:
    """An HTTP server on 127.0.0.1 (a thread of this process) that counts the GETs it answers."""

    def __init__(self) -> None:
        counts = self.counts = [0]

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                counts[0] += 1
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            do_POST = do_GET  # noqa: N815 (issue 26: a task's end ping is a POST)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ping"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Sink:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def take(self, expected: int = 1) -> str | None:
        """A warning unless exactly `expected` pings arrived since the last call."""
        got, self.counts[0] = self.counts[0], 0
        return None if got == expected else f"expected {expected} ping(s), the sink got {got}"


class Silent:
    """A port on 127.0.0.1 that accepts connections (the kernel's backlog) and never answers."""

    def __enter__(self) -> Silent:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/never"
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


# --------------------------------------------------------------------------- judging


def judge_idle_tick(row: Row, floor: Row | None, naive: Row | None) -> None:
    row.xfloor = _ratio(row.median, floor.median if floor else None)
    row.xnaive = _ratio(naive.median if naive else None, row.median)
    want = NAIVE_GOAL.get(row.n or 0)
    if want is None:
        row.goal = "(goals set for N=1000, 10000)"
        row.verdict = "—"
        return
    row.goal = f"≤ {FLOOR_GOAL:g}× floor; ≥ {want:g}× naive"
    misses = []
    if row.xfloor is None:
        misses.append("no floor to compare")
    elif row.xfloor > FLOOR_GOAL:
        misses.append(f"{row.xfloor:.1f}× floor")
    if row.xnaive is None:
        misses.append("no naive to compare")
    elif row.xnaive < want:
        misses.append(f"{row.xnaive:.2f}× naive")
    row.verdict = "misses by " + ", ".join(misses) if misses else "meets"


def judge_ratio(row: Row, base: Row | None, goal: float) -> None:
    """Judge `row` by its median over `base`'s median (the same tick without the extra)."""
    ratio = _ratio(row.median, base.median if base else None)
    row.goal = f"≤ {goal:g}× the idle tick"
    if ratio is None:
        row.verdict = "— (no idle tick at this N to compare)"
    else:
        row.verdict = f"{'meets' if ratio <= goal else 'misses'}: {ratio:.2f}× the idle tick"


def judge_rss(row: Row) -> None:
    peak = row.rss_max_mib
    if peak is None:
        row.verdict = "no data"
    elif peak <= RSS_GOAL_MIB:
        row.verdict = f"meets (max {peak:.1f} MiB)"
    else:
        row.verdict = f"misses by {peak - RSS_GOAL_MIB:.1f} MiB (max {peak:.1f} MiB)"


# --------------------------------------------------------------------------- output


HEAD = ["scenario", "N", "median ms", "min ms", "RSS MiB", "× floor", "× faster than naive",
        "goal", "verdict"]
RIGHT = {1, 2, 3, 4, 5, 6}


def fmt(x: float | None, spec: str) -> str:
    return "" if x is None else format(x, spec)


def table_rows(rows: list[Row]) -> list[list[str]]:
    out = []
    for r in rows:
        n = "" if r.n is None else f"{r.n:,}"
        if r.skipped:
            out.append([r.scenario, n, "", "", "", "", "", r.goal, f"SKIPPED: {r.skipped}"])
            continue
        verdict = r.verdict
        if r.failed:
            verdict = f"FAILED ({len(r.failures)} bad run(s)); " + (verdict or "")
        if r.warnings:
            verdict += f" [! {len(r.warnings)} warning(s)]"
        med, mn = (None, None) if r.rss_only else (r.median, r.min)
        out.append([
            r.scenario, n, fmt(med, ".1f"), fmt(mn, ".1f"),
            "" if r.no_rss else fmt(r.rss_mib, ".1f"),
            fmt(r.xfloor, ".1f"), fmt(r.xnaive, ".2f"), r.goal, verdict.strip("; "),
        ])
    return out


def render(rows: list[Row]) -> str:
    body = table_rows(rows)
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(HEAD)]

    def line(cells: list[str]) -> str:
        parts = [c.rjust(w) if i in RIGHT else c.ljust(w)
                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(parts).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(HEAD), sep, *(line(b) for b in body)])


def machine() -> dict[str, object]:
    cpu = ""
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "executable": PY,
        "platform": platform.platform(),
        "loadavg": os.getloadavg(),
        "when": datetime.now().astimezone().isoformat(timespec="seconds"),
    }


def check_interpreter() -> str | None:
    real = os.path.realpath(PY)
    try:
        with open(real, "rb") as f:
            if f.read(2) == b"#!":
                return f"{PY} is a script (a shim?), not an interpreter: timings include it"
    except OSError as exc:
        return f"cannot read {real}: {exc}"
    return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Benchmark mdcron: tick, dispatch and list.")
    p.add_argument("--runs", type=int, help="timed runs per row (default 7; 3 with --quick)")
    p.add_argument("--sizes", help="task counts for the idle rows (default 1000,10000)")
    p.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "bench",
                   help="folder with make_tasks.py, floor.py, naive_tick.py")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: sizes 100,300, 3 runs, fixed scenarios at N=300")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    p.add_argument("--keep-env", action="store_true",
                   help="children get the caller's environment as is (PYTHONDONTWRITEBYTECODE)")
    p.add_argument("--no-pg", action="store_true",
                   help="skip the PostgreSQL rows (issue 11; need pgserver and psycopg)")
    p.add_argument("--no-web", action="store_true",
                   help="skip the dashboard rows (bench/web.py; needs requirements-dev.txt)")
    p.add_argument("--scale", type=int, help="task files for the command rows (default 10000;"
                   " 1000 with --quick; 0 skips them)")
    p.add_argument("--scale-runs", type=int, help="runs inserted for them (default 1000000;"
                   " 100000 with --quick)")
    p.add_argument("--only", default=",".join(GROUPS),
                   help="comma-separated groups of rows to run, of: " + ", ".join(GROUPS)
                   + " (default: all)")
    p.add_argument("--boundaries", type=int, help="daemon rows: wall-clock minutes measured after"
                   " a warm-up minute (default 5; 0 skips; each costs a minute)")
    args = p.parse_args(argv)
    if args.scale is None:
        args.scale = 1000 if args.quick else 10_000
    if args.scale_runs is None:
        args.scale_runs = 100_000 if args.quick else 1_000_000
    if args.boundaries is None:
        args.boundaries = 2 if args.quick else 5
    if args.runs is None:
        args.runs = 3 if args.quick else 7
    if args.sizes is None:
        args.sizes = "100,300" if args.quick else "1000,10000"
    try:
        args.sizes = [int(x.replace("_", "")) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        p.error(f"--sizes must be comma-separated whole numbers, got {args.sizes!r}")
    if args.runs < 1 or not args.sizes or min(args.sizes) < 1:
        p.error("--runs and every size must be >= 1")
    args.base_n = 300 if args.quick else GOAL_N
    args.only = {w.strip() for w in args.only.split(",") if w.strip()}
    if unknown := sorted(args.only - set(GROUPS)):
        p.error(f"--only: unknown group(s) {', '.join(unknown)}; the groups: {', '.join(GROUPS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    info = machine()
    print(f"mdcron bench — {info['when']}")
    print(f"machine: nproc={info['nproc']}  cpu={info['cpu'] or '?'}  "
          f"loadavg={' '.join(f'{x:.2f}' for x in info['loadavg'])}")  # type: ignore[union-attr]
    print(f"python {info['python']} ({info['executable']})  {info['platform']}")
    notes: list[str] = []
    if problem := check_interpreter():
        notes.append(f"WARNING: {problem}")
    shared: Path | None = args.shared.resolve()
    if not (shared / "make_tasks.py").exists():
        notes.append(f"NOTE: {shared} not found: tasks come from bench/gen_tasks.py "
                     "(same files as make_tasks.py); floor.py and naive_tick.py rows skipped")
        if not shared.is_dir():
            shared = None
    else:
        notes.append(f"reference scripts: {shared}")
    if shutil.which("date") is None:
        notes.append("WARNING: no `date` on PATH: the dispatch-latency row will fail")
    if args.runs < 5:
        notes.append(f"NOTE: {args.runs} runs per row (smoke run; use >= 5 for real numbers)")
    if args.quick:
        notes.append(f"NOTE: --quick: sizes {args.sizes}, fixed scenarios at N={args.base_n}; "
                     "goals are for N=1000/10000 and are not judged here")
    print(f"runs per row: {args.runs} (median and min; one untimed warm-up per row)")
    if not args.keep_env:
        core.CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "mdcron")], env=core.CHILD_ENV,
                       stdout=subprocess.DEVNULL, check=False)
        if "PYTHONDONTWRITEBYTECODE" in os.environ:
            notes.append("NOTE: bytecode cache on for the children (mdcron precompiled; "
                         "PYTHONDONTWRITEBYTECODE dropped; --keep-env keeps it)")
    for note in notes:
        print(note)
    print(flush=True)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mdcron-bench-") as tmp:
        rows = run_all(args, Path(tmp), shared)
    elapsed = time.perf_counter() - started

    print(render(rows))
    print()
    print(f"total bench time {elapsed:.0f} s. × floor = tick median / floor.py median (same N); "
          "× faster than naive = naive median / tick median.")
    failed = [r for r in rows if r.failed and not r.rss_only]
    for r in failed:
        print(f"\n!!! FAILED: {r.scenario} N={r.n}")
        for f in r.failures[:10]:
            print(f"    {f}")
    for r in rows:
        for w in r.warnings[:5]:
            print(f"! {r.scenario} N={r.n} {w}")

    web_ok = True
    if not args.no_web and not args.quick:
        web_ok = run_web_rows()

    if args.json:
        payload = {
            "machine": info,
            "runs": args.runs,
            "rows": [
                {
                    "scenario": r.scenario, "n": r.n, "goal": r.goal, "verdict": r.verdict,
                    "median_ms": None if r.rss_only else r.median,
                    "min_ms": None if r.rss_only else r.min,
                    "rss_mib_median": r.rss_mib, "rss_mib_max": r.rss_max_mib,
                    "x_floor": r.xfloor, "x_faster_than_naive": r.xnaive,
                    "failed": r.failed, "failures": r.failures, "warnings": r.warnings,
                    "skipped": r.skipped or None,
                    "samples": [
                        {"wall_ms": s.wall_ms, "metric_ms": s.metric_ms, "rss_kib": s.rss_kib,
                         "rc": s.rc}
                        for s in r.samples
                    ],
                }
                for r in rows
            ],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"results written to {args.json}")
    return 1 if failed or not web_ok else 0


def run_web_rows() -> bool:
    """The dashboard's rows (issue 10), from bench/web.py: a real `scheduler.py web`."""
    try:
        import httpx  # noqa: F401 (bench/web.py drives the server with it)
    except ImportError:
        print("\nweb rows skipped: httpx missing (pip install -r requirements-dev.txt)")
        return True
    from web import print_rows, web_rows

    print("\nMission Control (bench/web.py: 1,000 tasks, 100,000 runs, 25 requests a row)")
    rows = web_rows()
    print_rows(rows)
    return all(r["ok"] for r in rows)


if __name__ == "__main__":
    sys.exit(main())
