"""Issue 11: several hosts against one PostgreSQL state. Hosts are separate homes on this machine
(own tasks/ copy, logs, locks, parse cache, host name), ticking in real processes at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import SCHEDULER, render_task, run_cli
from test_cache import age

from mdcron.state.schema import SCHEMA_VERSION

BEFORE = "2026-11-23T09:59:00+00:00"
NOW = "2026-11-23T10:00:00+00:00"
TASKS = 200
TICKS_PER_HOST = 10


@contextmanager
def database_refusing(pg_server: str, pg_url: str) -> Iterator[None]:
    """The test's database refuses new connections and its open ones are cut (a server going
    away mid-run); it takes connections again when the block ends."""
    import psycopg

    name = pg_url.split("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                      " WHERE datname = %s", (name,))
        try:
            yield
        finally:
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")


def make_home(root: Path, name: str, state_url: str | None, marks: Path, tasks: int) -> Path:
    home = root / name
    (home / "tasks").mkdir(parents=True)
    config = f"host: {name}\nmax_parallel: 16\n"
    if state_url:
        config += f"state_url: '{state_url}'\n"
    (home / "scheduler.yaml").write_text(config, encoding="utf-8")
    for i in range(tasks):
        task_id = f"t{i:03d}"
        command = f"echo {name} $MDCRON_RUN_ID >> {marks}/{task_id}"
        (home / "tasks" / f"{task_id}.md").write_text(
            render_task(task_id, schedule="0 10 * * *", command=command), encoding="utf-8")
    return home


def each_slot_once(home: Path, ran: dict, tasks: int) -> dict[int, str]:
    """Every (task, slot) ran once, successfully, and each row names the host whose task
    process ran it (`ran`: each task's marks file lines, "host run_id"). Run id -> host."""
    rows = history(home)
    assert len(rows) == tasks
    assert Counter((r["task_id"], r["scheduled_for"]) for r in rows).most_common(1)[0][1] == 1
    assert all(r["status"] == "success" and r["trigger"] == "schedule" for r in rows)
    by_id = {r["run_id"]: r["host"] for r in rows}
    for (line,) in ran.values():
        host, run_id = line.split()
        assert by_id[int(run_id)] == host
    return by_id


def start_tick(home: Path, now: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    return subprocess.Popen(
        [sys.executable, str(SCHEDULER), "--home", str(home), "tick", "--now", now],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def history(home: Path, n: int = 10_000) -> list[dict]:
    out = run_cli(home, "history", "-n", str(n), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
def test_every_task_slot_runs_exactly_once_across_hosts(backend, request, tmp_path):
    """3 hosts x 10 ticks at the same instant x 200 due tasks (SQLite: one host, 10 ticks)."""
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    names = ["a", "b", "c"] if url else ["a"]
    marks = tmp_path / "marks"
    marks.mkdir()
    homes = [make_home(tmp_path, name, url, marks, TASKS) for name in names]
    for home in homes:  # first seen: the 10:00 slot is due from here on
        out = run_cli(home, "tick", "--now", BEFORE)
        assert out.returncode == 0, out.stderr
    started = time.monotonic()
    ticks = [start_tick(home, NOW) for _ in range(TICKS_PER_HOST) for home in homes]
    outs = [t.communicate(timeout=600) for t in ticks]
    took = time.monotonic() - started
    assert all(t.returncode == 0 for t in ticks), [o[1][-2000:] for o in outs]
    ran = {p.name: p.read_text().split("\n")[:-1] for p in marks.iterdir()}
    lost = [f"t{i:03d}" for i in range(TASKS) if f"t{i:03d}" not in ran]
    doubled = {task: lines for task, lines in ran.items() if len(lines) != 1}
    assert lost == [] and doubled == {}
    by_id = each_slot_once(homes[0], ran, TASKS)  # every host reads the same history
    per_host = Counter(by_id.values())
    raced = sum(o[0].count("another tick claimed this slot first") for o in outs)
    print(f"\n{backend}: {len(ticks)} ticks, {TASKS} tasks in {took:.1f} s; per host"
          f" {dict(per_host)}; {raced} claims lost to another tick")
    if url:
        assert set(per_host) <= set(names)


def test_history_and_list_show_the_host(pg_url, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = (make_home(tmp_path, name, pg_url, marks, 1) for name in ("web1", "web2"))
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 0
    assert run_cli(b, "tick", "--now", BEFORE).returncode == 0
    out = run_cli(b, "tick", "--now", NOW)
    assert out.returncode == 0, out.stderr
    later = run_cli(a, "tick", "--now", NOW)  # the slot is b's: a sees it claimed
    assert later.returncode == 0 and later.stdout == "", later.stdout
    assert (marks / "t000").read_text().split() == ["web2", "1"]
    table = run_cli(a, "history").stdout
    assert "host" in table and "web2" in table
    listing = run_cli(a, "list").stdout
    assert "on web2" in listing
    rows = json.loads(run_cli(a, "list", "--json").stdout)
    assert rows[0]["last_host"] == "web2"


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SECRET = "pw-never-shown"


@pytest.mark.parametrize("down", ["closed port", "stopped server"])
def test_an_unreachable_database_runs_nothing_exits_2_and_alerts(down, home, http_sink,
                                                                 tmp_path):
    """The tick cannot prove a slot unclaimed: nothing runs, no local fallback, a direct alert."""
    marks = tmp_path / "marks"
    marks.mkdir()
    server = None
    if down == "closed port":
        url = f"postgresql://mdcron:{SECRET}@127.0.0.1:{closed_port()}/mdcron"
    else:  # a server of its own that is up for the first tick and stopped for the second
        pgserver = pytest.importorskip("pgserver", reason="pip install -r requirements-dev.txt")
        import tempfile

        server = pgserver.get_server(tempfile.mkdtemp(prefix="mdcron-pg-down-"),
                                     cleanup_mode="delete")
        url = server.get_uri()
    make_home(tmp_path, "h", url, marks, 1)
    home = tmp_path / "h"
    with open(home / "scheduler.yaml", "a", encoding="utf-8") as handle:
        handle.write(f"notify:\n  destinations:\n    ops: \"{http_sink.json_url()}\"\n")
    if server is not None:
        assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
        server.cleanup()
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 2, out.stdout + out.stderr
    assert list(marks.iterdir()) == []  # nothing ran
    assert "state_url" in out.stderr and "cannot connect" in out.stderr
    assert "Traceback" not in out.stderr
    shown = url.replace(SECRET, "***") if SECRET in url else url
    assert shown.split("?")[0].rsplit("@", 1)[-1] in out.stderr  # names where it looked
    alerts = http_sink.bodies()
    assert len(alerts) == 1 and "tasks are not running" in alerts[0]["title"]
    assert "cannot connect" in alerts[0]["message"]
    doctor = run_cli(home, "doctor")
    assert "cannot be reached" in doctor.stdout and "start PostgreSQL" in doctor.stdout
    everything = out.stdout + out.stderr + json.dumps(alerts) + doctor.stdout + doctor.stderr
    assert SECRET not in everything


def test_doctor_reports_a_reachable_postgresql_state(pg_url, home):
    (home / "scheduler.yaml").write_text(f"state_url: '{pg_url}'\nhost: web1\n")
    out = run_cli(home, "doctor")
    assert "PostgreSQL state" in out.stdout and "empty (the next tick creates" in out.stdout
    assert "no tick recorded yet" in out.stdout
    assert run_cli(home, "tick").returncode == 0
    after = run_cli(home, "doctor").stdout
    assert f"schema {SCHEMA_VERSION}" in after
    assert "no tick recorded yet" not in after  # this host's last tick, kept locally


def test_a_host_not_listed_in_hosts_does_not_claim(pg_url, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    homes = [make_home(tmp_path, name, pg_url, marks, 0) for name in ("a", "b", "c")]
    for home in homes:
        for task_id, hosts in (("only-b", ["b"]), ("b-or-c", ["b", "c"]), ("any", None)):
            fields = {"hosts": hosts} if hosts else {}
            (home / "tasks" / f"{task_id}.md").write_text(render_task(
                task_id, schedule="0 10 * * *",
                command=f"echo {home.name} >> {marks}/{task_id}", **fields))
        assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    a, b, c = homes
    out = run_cli(a, "tick", "--now", NOW)  # a ticks first: it may only claim `any`
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in marks.iterdir()) == ["any"]
    assert "not on this host" in run_cli(a, "why", "only-b").stdout
    assert run_cli(c, "tick", "--now", NOW).returncode == 0
    assert run_cli(b, "tick", "--now", NOW).returncode == 0
    ran = {p.name: p.read_text().split() for p in marks.iterdir()}
    assert ran == {"any": ["a"], "b-or-c": ["c"], "only-b": ["b"]}


def test_hosts_must_be_a_list_of_host_names(home, write_task, cli):
    write_task("t", command="true", hosts="web1")
    write_task("u", command="true", hosts=["web.1"])
    write_task("v", command="true", hosts=[])
    out = cli("validate")
    assert out.returncode != 0
    assert "use a list: hosts: [web1, web2]" in out.stdout + out.stderr
    assert '"web.1" is not a host name' in out.stdout + out.stderr
    assert "would run the task nowhere" in out.stdout + out.stderr


LEASE = 2.4  # seconds of lease in these tests (renewed every 0.8 s by the tick's thread;
#             its holder fences itself 1.92 s after its last renewal: issue 23)


def lease_homes(tmp_path: Path, pg_url: str,
                lease: float = LEASE) -> tuple[Path, Path, Path]:
    """Hosts a and b with one `* 10 * * *` task (timeout 60 s) and leases of LEASE seconds; on
    a it runs until `release` exists, on b it ends at once. Both have seen it at 09:59."""
    marks = tmp_path / "marks"
    a, b = host_pair(tmp_path, pg_url, marks, f"lease_seconds: {lease}\n")
    for home in (a, b):
        wait = (f"; while [ ! -e {marks}/release ]; do sleep 0.05; done" if home is a else "")
        (home / "tasks" / "job.md").write_text(render_task(
            "job", schedule="* 10 * * *", timeout=60,
            command=f"echo {home.name} $MDCRON_RUN_ID >> {marks}/ran{wait}"), encoding="utf-8")
        assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    return a, b, marks


def host_pair(tmp_path: Path, pg_url: str, marks: Path, config: str) -> tuple[Path, Path]:
    """Hosts a and b on one database, without tasks, `config` added to each scheduler.yaml."""
    marks.mkdir()
    homes = []
    for name in ("a", "b"):
        home = make_home(tmp_path, name, pg_url, marks, 0)
        with open(home / "scheduler.yaml", "a", encoding="utf-8") as handle:
            handle.write(config)
        homes.append(home)
    return homes[0], homes[1]


def job_rows(home: Path) -> list[tuple]:
    return [(r["host"], r["status"], r["scheduled_for"][11:16], r["error"] or "")
            for r in reversed(history(home)) if r["task_id"] == "job"]


def wait_for_file(path: Path, timeout: float = 30.0) -> None:
    give_up = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < give_up, f"{path} never appeared"
        time.sleep(0.02)


def wait_recorded(home: Path, task_id: str = "job", timeout: float = 30.0) -> None:
    """Until the tick has recorded its task's process group in the lock (the task may run
    before that: a tick killed in between leaves a run that recovery ends as crashed)."""
    from mdcron.run.locks import read_info

    give_up = time.monotonic() + timeout
    while (info := read_info(home / "state" / "locks" / f"{task_id}.lock")) is None \
            or info.pgid is None:
        assert time.monotonic() < give_up, f"{home.name}'s lock never named the task's group"
        time.sleep(0.02)


def lease_of(pg_url: str, task_id: str = "job") -> tuple[str | None, int, bool]:
    """(holder, fence, expired by the database's clock) of a task's lease row."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        return conn.execute("SELECT holder, fence, coalesce(expires_at <"
                            " extract(epoch FROM clock_timestamp()), true) FROM leases"
                            " WHERE task_id = %s", (task_id,)).fetchone()


def test_a_live_tick_renews_its_lease_while_its_task_outlives_it(pg_url, tmp_path):
    """A's task runs for several lease intervals; A's tick renews the lease from its own
    thread, so B skips every slot meanwhile, then A's result is recorded."""
    # twice LEASE: A fences itself 0.8 lease after its last renewal, renewed every third of
    # it, so a renewal may come 2.2 s late (1.1 s with LEASE: a loaded machine's pause)
    lease = 2 * LEASE
    a, b, marks = lease_homes(tmp_path, pg_url, lease)
    tick_a = start_tick(a, NOW)
    wait_for_file(marks / "ran")  # A's task is running, its lease taken
    holder, fence, expired = lease_of(pg_url)
    assert holder.startswith(f"a:{tick_a.pid}:") and fence == 1 and not expired
    for minute in ("01", "02", "03"):  # 2 leases of real time in all: renewal must run
        time.sleep(lease * 2 / 3)
        assert lease_of(pg_url)[2] is False, "the lease expired although A's tick lives"
        out = run_cli(b, "tick", "--now", f"2026-11-23T10:{minute}:00+00:00")
        assert out.returncode == 0, out.stderr
    (marks / "release").touch()
    out, err = tick_a.communicate(timeout=60)
    assert tick_a.returncode == 0, out + err
    rows = job_rows(b)
    assert rows[0] == ("a", "success", "10:00", "")
    assert [r[:3] for r in rows[1:]] == [("b", "skipped", f"10:0{m}") for m in (1, 2, 3)]
    assert all(r[3].startswith("previous run still running on host a since 2026-11-23 10:00")
               for r in rows[1:])
    assert lease_of(pg_url)[0] is None  # released when the run ended
    assert (marks / "ran").read_text().split() == ["a", "1"]


def test_the_next_tick_of_a_live_host_extends_its_orphaned_task_s_lease(pg_url, tmp_path):
    """A's tick is killed but A lives: cron's next tick there finds the task still running
    within its deadline and extends its lease, as the flock outlives the tick.
    (A lease of 90 s: on a loaded machine the next tick may start 20 s after the kill, and an
    expired lease is rightly not revived.)"""
    import signal

    import psycopg

    a, b, marks = lease_homes(tmp_path, pg_url, lease=90)
    tick_a = start_tick(a, NOW)
    wait_for_file(marks / "ran")
    wait_recorded(a)  # killed before, the run would rightly be ended as crashed
    tick_a.send_signal(signal.SIGKILL)
    tick_a.communicate()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        before = conn.execute("SELECT expires_at FROM leases").fetchone()[0]
        out = run_cli(a, "tick", "--now", "2026-11-23T10:00:30+00:00")
        assert out.returncode == 0, out.stderr
        after, holder = conn.execute("SELECT expires_at, holder FROM leases").fetchone()
    said = f"{out.stdout}{out.stderr}; rows: {job_rows(b)}"
    assert after > before and holder.startswith(f"a:{tick_a.pid}:"), said
    assert job_rows(b) == [("a", "running", "10:00", "")]
    (marks / "release").touch()


def test_a_killed_tick_loses_its_lease_and_its_host_kills_the_stale_run_when_back(pg_url,
                                                                                  tmp_path):
    """A's tick is killed with SIGKILL while its task runs: B skips until A's lease expires
    (nobody renews it), then takes the task over on its next slot and closes A's row as
    lost. When A ticks again it kills its own stale process group; A's late result
    overwrites nothing."""
    import signal

    from mdcron.run.locks import read_info
    from mdcron.run.process import group_alive

    a, b, marks = lease_homes(tmp_path, pg_url)
    tick_a = start_tick(a, NOW)
    wait_for_file(marks / "ran")
    out = run_cli(b, "tick", "--now", "2026-11-23T10:01:00+00:00")
    assert out.returncode == 0, out.stderr
    (held, skipped) = job_rows(b)
    assert held == ("a", "running", "10:00", "")  # not `crashed`: B cannot see A's processes
    assert skipped[:3] == ("b", "skipped", "10:01")
    wait_recorded(a)
    tick_a.send_signal(signal.SIGKILL)  # its task keeps running, in its own group
    tick_a.communicate()
    give_up = time.monotonic() + 30
    while not lease_of(pg_url)[2]:  # the database's clock passes the last renewal + LEASE
        assert time.monotonic() < give_up, "A's lease never expired"
        time.sleep(0.1)
    late = run_cli(b, "tick", "--now", "2026-11-23T10:02:00+00:00")
    assert late.returncode == 0, late.stderr
    rows = job_rows(b)
    assert rows[0][:3] == ("a", "lost", "10:00") and "host a unreachable since" in rows[0][3]
    assert rows[2] == ("b", "success", "10:02", "")
    assert lease_of(pg_url)[:2] == (None, 2)  # b took it (fence 2) and released it
    info = read_info(a / "state" / "locks" / "job.lock")
    assert info is not None and info.pgid is not None and group_alive(info.pgid)
    back = run_cli(a, "tick", "--now", "2026-11-23T10:02:30+00:00")
    assert "taken over by host b" in back.stdout, back.stdout + back.stderr
    assert not group_alive(info.pgid)
    assert job_rows(b) == rows  # nothing of A's overwrote B's rows
    assert (marks / "ran").read_text().split() == ["a", "1", "b", "3"]


def test_dry_run_reads_the_shared_state(pg_url, tmp_path):
    """b's dry run at 10:00 knows a already claimed the slot (its own cache knows nothing)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = (make_home(tmp_path, name, pg_url, marks, 1) for name in ("a", "b"))
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 0
    assert "would run" in run_cli(b, "tick", "--dry-run", "--now", NOW).stdout
    assert run_cli(a, "tick", "--now", NOW).returncode == 0
    dry = run_cli(b, "tick", "--dry-run", "--now", NOW)
    assert dry.returncode == 0 and "would run" not in dry.stdout, dry.stdout


def test_state_copy_moves_sqlite_history_to_postgresql(pg_url, home, write_task, cli):
    import sqlite3

    (home / "scheduler.yaml").write_text("host: old\n")
    write_task("ok", schedule="* 10 * * *", command="echo fine")
    write_task("bad", schedule="* 10 * * *", command="exit 3")
    cli("tick", "--now", BEFORE)
    for minute in ("00", "01", "02"):
        cli("tick", "--now", f"2026-11-23T10:{minute}:00+00:00")
    assert cli("comment", "ok", "please keep it short").returncode == 0
    before = json.loads(cli("history", "-n", "100", "--json").stdout)
    comments = json.loads(cli("comments", "ok", "--json").stdout)
    incidents = cli("incidents", "--json").stdout
    assert len(before) >= 6

    db = sqlite3.connect(home / "state" / "mdcron.db")  # a row from before schema 5
    db.execute("UPDATE runs SET host = NULL WHERE id = 1")
    db.commit()
    db.close()
    out = cli("state", "copy", "--to", pg_url)
    assert out.returncode == 0, out.stderr
    assert f"{len(before)} runs" in out.stdout and "next: set state_url" in out.stdout
    (home / "scheduler.yaml").write_text(f"state_url: '{pg_url}'\nhost: old\n")
    after = json.loads(cli("history", "-n", "100", "--json").stdout)
    assert [(r["run_id"], r["task_id"], r["status"]) for r in after] == \
        [(r["run_id"], r["task_id"], r["status"]) for r in before]
    assert {r["host"] for r in after} == {"old"}  # the NULL one too: this host's
    assert json.loads(cli("comments", "ok", "--json").stdout) == comments
    assert cli("incidents", "--json").stdout == incidents
    again = cli("tick", "--now", "2026-11-23T10:02:30+00:00")  # 10:02 was claimed: not again
    assert again.returncode in (0, 1) and "ok" not in again.stdout
    cli("tick", "--now", "2026-11-23T10:03:00+00:00")
    newest = json.loads(cli("history", "-n", "1", "--json").stdout)[0]
    assert newest["run_id"] > max(r["run_id"] for r in before) and newest["host"] == "old"

    refused = cli("state", "copy", "--to", pg_url)  # the target is not empty any more
    assert refused.returncode == 2 and "already holds" in refused.stderr


def test_state_copy_needs_a_postgresql_url(home, cli):
    out = cli("state", "copy", "--to", "mysql://x/y")
    assert out.returncode == 2 and "only postgresql://" in out.stderr


def test_a_suspension_on_one_host_holds_on_the_others_until_enabled_again(pg_url, tmp_path):
    """a's ladder suspends the task (a's file says enabled: false); b's copy still says
    enabled: true, yet b does not run it, until b's file is edited after the suspension."""
    from mdcron.settings.config import load_config
    from mdcron.state.store import state_store

    marks = tmp_path / "marks"
    marks.mkdir()
    homes = []
    for name in ("a", "b"):
        home = make_home(tmp_path, name, pg_url, marks, 0)
        with open(home / "scheduler.yaml", "a", encoding="utf-8") as handle:
            handle.write("max_consecutive_failures: 1\n")
        (home / "tasks" / "flaky.md").write_text(render_task(
            "flaky", schedule="* * * * *", self_heal=False,
            command=f'basename "$PWD" >> {marks}/ran; exit 1'),  # one text: the same file
            encoding="utf-8")
        homes.append(home)
    a, b = homes
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 1  # fails, suspended on a
    assert "enabled: false" in (a / "tasks" / "flaky.md").read_text()
    with state_store(load_config(b)[0]) as store:
        [(at,)] = store.connect().execute(
            "SELECT suspended_at FROM task_state WHERE task_id = 'flaky'").fetchall()
    os.utime(b / "tasks" / "flaky.md", (at - 3600, at - 3600))  # b's copy: older, untouched
    out = run_cli(b, "tick", "--now", NOW)
    assert out.returncode == 0, out.stderr
    assert "suspended on host a" in out.stdout
    assert (marks / "ran").read_text().split() == ["a"]

    mine = b / "tasks" / "flaky.md"  # edited after the suspension (its content: issue 23)
    mine.write_text(mine.read_text().replace("; exit 1", "; exit 2"), encoding="utf-8")
    out = run_cli(b, "tick", "--now", "2026-11-23T10:01:00+00:00")
    assert "enabled again" in out.stdout
    assert (marks / "ran").read_text().split() == ["a", "b"]
    with state_store(load_config(b)[0]) as store:  # it failed on b too: b suspended it now
        assert store.connect().execute("SELECT suspended_by FROM task_state").fetchall() == \
            [("b",)]


@pytest.mark.parametrize("offset, refused", [(0.0, False), (29.9, False), (-29.9, False),
                                             (30.5, True), (-300.0, True)])
def test_skew_refusal_is_judged_against_the_allowance(offset, refused):
    from mdcron.hosts.peers import skew_refusal

    reason = skew_refusal(offset, 30.0, "web1")
    assert (reason is not None) is refused
    if refused:
        assert "web1" in reason and "max_clock_skew (30 s)" in reason and "NTP" in reason
        assert ("ahead of" if offset > 0 else "behind") in reason


def test_a_host_whose_clock_is_off_claims_nothing_and_alerts(pg_url, tmp_path, http_sink):
    """No clock is faked: an allowance of 0 s makes this machine's real offset from the
    database (never exactly 0) too much, so the refusal path runs for real."""
    marks = tmp_path / "marks"
    marks.mkdir()
    home = make_home(tmp_path, "h", pg_url, marks, 1)
    assert run_cli(home, "tick", "--now", BEFORE).returncode == 0  # 30 s default: fine
    with open(home / "scheduler.yaml", "a", encoding="utf-8") as handle:
        handle.write(f"max_clock_skew: 0s\nnotify:\n  destinations:\n"
                     f"    ops: \"{http_sink.json_url()}\"\n")
    out = run_cli(home, "tick", "--now", NOW)
    assert out.returncode == 2
    assert "clock (h) is" in out.stderr and "max_clock_skew (0 s)" in out.stderr
    assert list(marks.iterdir()) == []
    assert len(http_sink.bodies()) == 1 and "max_clock_skew" in http_sink.bodies()[0]["message"]


IDLE_PROBE = """
import sys
from mdcron.cli.main import main
code = main(["--home", sys.argv[1], "tick", "--now", sys.argv[2]])
print("CODE", code, "PSYCOPG", "psycopg" in sys.modules)
"""


def probe_tick(home: Path, now: str, extra: dict[str, str] | None = None) -> str:
    """A tick in a fresh interpreter that says whether it needed psycopg (the full tick)."""
    from conftest import REPO

    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")} | (extra or {})
    out = subprocess.run([sys.executable, "-c", IDLE_PROBE, str(home), now], cwd=REPO,
                         capture_output=True, text=True, env=env)
    assert "CODE" in out.stdout, out.stdout + out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_an_idle_tick_on_postgresql_asks_one_question_without_psycopg(pg_url, tmp_path):
    """a's idle ticks take the fast path (no psycopg); a change to the shared state by another
    host (b's `enable`, which writes task_state) sends a's next tick down the full path, after
    which it is idle again."""
    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = (make_home(tmp_path, name, pg_url, marks, 3) for name in ("a", "b"))
    for home in (a, b):
        assert run_cli(home, "tick", "--now", BEFORE).returncode == 0  # full: first seen
    age(a)  # the files were written just now: racy until the cache's reading is 2 s later
    assert probe_tick(a, "2026-11-23T09:59:20+00:00") == "CODE 0 PSYCOPG False"
    assert probe_tick(a, "2026-11-23T09:59:40+00:00") == "CODE 0 PSYCOPG False"
    assert run_cli(b, "enable", "t001").returncode == 0
    assert probe_tick(a, "2026-11-23T09:59:45+00:00") == "CODE 0 PSYCOPG True"
    age(a)
    assert probe_tick(a, "2026-11-23T09:59:50+00:00") == "CODE 0 PSYCOPG False"
    assert list(marks.iterdir()) == []  # idle means idle: nothing ran
    out = run_cli(a, "tick", "--now", NOW)  # due: the full tick, and it runs them
    assert out.returncode == 0 and len(list(marks.iterdir())) == 3, out.stdout + out.stderr


def test_the_idle_tick_declines_another_database_or_a_clock_too_far_off(pg_url, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    a = make_home(tmp_path, "a", pg_url, marks, 1)
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 0
    age(a)
    assert probe_tick(a, "2026-11-23T09:59:20+00:00") == "CODE 0 PSYCOPG False"
    from mdcron.state.store import Store

    with Store(a / "state" / "mdcron.db") as local:  # as if the copy were of another database
        local.set_meta("pg_url", "0" * 64)
    assert probe_tick(a, "2026-11-23T09:59:30+00:00") == "CODE 0 PSYCOPG True"
    age(a)
    assert probe_tick(a, "2026-11-23T09:59:35+00:00") == "CODE 0 PSYCOPG False"
    with Store(a / "state" / "mdcron.db") as local:  # as if its allowance were 0 s
        local.set_meta("pg_max_skew", "0.0")
    assert probe_tick(a, "2026-11-23T09:59:37+00:00") == "CODE 0 PSYCOPG True"
    age(a)
    assert probe_tick(a, "2026-11-23T09:59:38+00:00") == "CODE 0 PSYCOPG False"
    with open(a / "scheduler.yaml", "a", encoding="utf-8") as handle:
        handle.write("max_clock_skew: 0s\n")  # this machine's real offset is too much now
    assert run_cli(a, "tick", "--now", "2026-11-23T09:59:40+00:00").returncode == 2
    assert probe_tick(a, "2026-11-23T09:59:45+00:00") == "CODE 2 PSYCOPG True"


@pytest.mark.parametrize("text, env, expected", [
    ("+state_url: 'postgresql://u@h/db'\n", {}, "postgresql://u@h/db"),  # the first line
    ("+host: a\nstate_url: postgresql://u:${PGI_PW}@h/db  # shared\n", {"PGI_PW": "x"},
     "postgresql://u:x@h/db"),
    ("+state_url: postgresql://u:${PGI_UNSET}@h/db\n", {}, None),
    ("+host: a\n", {"MDCRON_STATE_URL": "postgresql://e@h/db"}, "postgresql://e@h/db"),
    ("+state_url:\n  postgresql://u@h/db\n", {}, None),  # not this simple: the full tick
])
def test_the_idle_tick_finds_the_url_as_config_does(text, env, expected, monkeypatch):
    from mdcron.state.pgidle import state_url

    for name in ("MDCRON_STATE_URL", "PGI_PW", "PGI_UNSET"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert state_url(text) == expected


FORMS = [  # scheduler.yaml texts; PG_URL=postgresql://u:p@h/db, PGI_PW=s3cret
    "state_url: ${PG_URL}\n", "state_url: '${PG_URL}'\n", 'state_url: "${PG_URL}"\n',
    "state_url:   ${PG_URL}   # the shared one\n", "host: a\r\nstate_url: ${PG_URL}\r\n",
    "state_url: postgresql://u:${PGI_PW}@h/db\n", "state_url: 'postgresql://u:it''s@h/db'\n",
    "state_url: postgresql://u@h/db#x\n", "state_url: postgresql://u@h/db\nstate_url: ${PG_URL}\n",
    'state_url: "postgresql://u@h/\\x64b"\n', "state_url: >-\n  postgresql://u@h/db\n",
    "notify:\n  state_url: ${PG_URL}\n",
    "state_url: 'postgresql://u@h/db'  # x\n",
]


@pytest.mark.parametrize("text", FORMS)
def test_the_idle_tick_reads_state_url_as_config_does_or_not_at_all(text, tmp_path,
                                                                    monkeypatch):
    """The oracle is config.load_config: the idle tick's URL is the same, or None (full tick)."""
    from mdcron.settings.config import load_config
    from mdcron.state.pgidle import state_url

    monkeypatch.delenv("MDCRON_STATE_URL", raising=False)
    monkeypatch.setenv("PG_URL", "postgresql://u:p@h/db")
    monkeypatch.setenv("PGI_PW", "s3cret")
    (tmp_path / "scheduler.yaml").write_bytes(text.encode())
    config, _ = load_config(tmp_path)
    mine = state_url("+" + text)
    assert mine in (config.state_url, None), (mine, config.state_url)
    simple = "\\" not in text and ">-" not in text and "  state" not in text
    assert (mine is not None) == simple


def running_job(tmp_path: Path, pg_url: str, end: str = ""):
    """Host a's tick at NOW, its task `job` running until marks/release exists (then `end`)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    a = make_home(tmp_path, "a", pg_url, marks, 0)
    (a / "tasks" / "job.md").write_text(render_task(
        "job", schedule="0 10 * * *", command=f"echo a >> {marks}/ran;"
        f" while [ ! -e {marks}/release ]; do sleep 0.05; done{end}"), encoding="utf-8")
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 0
    tick = start_tick(a, NOW)
    wait_for_file(marks / "ran")
    return a, marks, tick


def test_a_connection_lost_while_a_task_runs_is_made_again_and_the_result_kept(pg_url,
                                                                               pg_server,
                                                                               tmp_path):
    """The server drops every mdcron connection (as a restart or a proxy would) while the
    task runs: the tick connects again when it records the result; one row, not lost."""
    import psycopg

    a, marks, tick = running_job(tmp_path, pg_url)
    with psycopg.connect(pg_server, autocommit=True) as admin:
        gone = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                             " WHERE application_name = 'mdcron'").fetchone()[0]
    assert gone >= 1
    (marks / "release").touch()
    out, err = tick.communicate(timeout=60)
    assert tick.returncode == 0, out + err
    assert [(r["status"], r["host"]) for r in history(a)] == [("success", "a")]


def test_an_alert_names_the_host_and_is_sent_once(pg_url, tmp_path, http_sink):
    marks = tmp_path / "marks"
    marks.mkdir()
    homes = []
    for name in ("a", "b"):
        home = make_home(tmp_path, name, pg_url, marks, 0)
        with open(home / "scheduler.yaml", "a", encoding="utf-8") as handle:
            handle.write(f"notify:\n  destinations:\n    ops: \"{http_sink.json_url()}\"\n")
        (home / "tasks" / "bad.md").write_text(render_task(
            "bad", schedule="0 10 * * *", self_heal=False, command="exit 3"), encoding="utf-8")
        assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
        homes.append(home)
    ticks = [start_tick(home, NOW) for home in homes]
    for t in ticks:
        t.communicate(timeout=60)
    for home in homes:  # both flush the shared outbox; the message goes out once
        run_cli(home, "tick", "--now", "2026-11-23T10:00:30+00:00")
    messages = [b["message"] for b in http_sink.bodies()]
    assert len(messages) == 1, messages
    ran_on = history(homes[0])[0]["host"]
    assert messages[0].endswith(f"(host {ran_on})")


def test_a_result_the_database_cannot_take_is_spooled_and_recorded_by_the_next_tick(
        pg_url, pg_server, tmp_path):
    """The database refuses connections when the run ends: the tick keeps the outcome in
    state/spool.jsonl and stops with a clear message (exit 2); once the database is back the
    next tick records it before anything else: one row, the real outcome, nothing lost."""

    a, marks, tick = running_job(tmp_path, pg_url, "; exit 4")
    with database_refusing(pg_server, pg_url):
        (marks / "release").touch()
        out, err = tick.communicate(timeout=60)
        assert tick.returncode == 2, out + err
        assert "became unreachable" in err and "spool.jsonl" in err
        assert (a / "state" / "spool.jsonl").exists()
    later = run_cli(a, "tick", "--now", "2026-11-23T10:00:30+00:00")
    assert "recorded from the spool" in later.stdout, later.stdout + later.stderr
    rows = history(a)
    assert [(r["status"], r["exit_code"]) for r in rows] == [("failed", 4)]
    assert not (a / "state" / "spool.jsonl").exists()
    assert (marks / "ran").read_text().split() == ["a"]  # ran once


def test_list_and_doctor_name_a_host_whose_copy_of_a_task_file_differs(pg_url, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = (make_home(tmp_path, name, pg_url, marks, 0) for name in ("a", "b"))
    for home in (a, b):
        for task_id in ("t000", "t001"):
            (home / "tasks" / f"{task_id}.md").write_text(render_task(
                task_id, schedule="0 10 * * *", command="true"), encoding="utf-8")
    (b / "tasks" / "t001.md").write_text(render_task("t001", schedule="0 11 * * *",
                                                     command="true"), encoding="utf-8")
    for home in (a, b):
        assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    listing = run_cli(a, "list")
    assert "t001: the hosts' copies of its file differ: a (" in listing.stderr
    assert "t000" not in listing.stderr
    doctor = run_cli(a, "doctor")
    assert "copies of its file differ" in doctor.stdout and "sync tasks/" in doctor.stdout
    (b / "tasks" / "t001.md").write_bytes((a / "tasks" / "t001.md").read_bytes())
    assert run_cli(b, "tick", "--now", "2026-11-23T09:59:30+00:00").returncode == 0
    assert "differ" not in run_cli(a, "list").stderr


def test_a_task_whose_hosts_all_stopped_is_named_by_list_and_doctor(pg_url, tmp_path):
    """b is listed for the task but never ticks: a says the task runs nowhere. Once b ticks,
    the note is gone; b's idle ticks keep saying it is alive (in their one query)."""
    import psycopg

    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = (make_home(tmp_path, name, pg_url, marks, 0) for name in ("a", "b"))
    for home in (a, b):
        (home / "tasks" / "only-b.md").write_text(render_task(
            "only-b", schedule="0 10 * * *", command="true", hosts=["b"]), encoding="utf-8")
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 0
    note = "only-b: none of its hosts ticks any more: b (never seen)"
    assert note in run_cli(a, "list").stderr
    assert note in run_cli(a, "doctor").stdout
    assert run_cli(b, "tick", "--now", BEFORE).returncode == 0  # b's first (full) tick
    assert "none of its hosts" not in run_cli(a, "list").stderr
    with psycopg.connect(pg_url, autocommit=True) as conn:  # as if b's tick were 10 min ago
        conn.execute("UPDATE hosts SET seen_at = seen_at - 600 WHERE name = 'b'")
    assert "only-b: none of its hosts ticks any more: b (last tick 10m" in \
        run_cli(a, "list").stderr
    age(b)
    assert probe_tick(b, "2026-11-23T09:59:30+00:00") == "CODE 0 PSYCOPG False"  # idle
    assert "none of its hosts" not in run_cli(a, "list").stderr  # its one query said so


def test_a_due_task_whose_hosts_all_stopped_alerts_once_until_that_changes(pg_url, tmp_path,
                                                                         http_sink):
    """One message while b stays silent, however long (not one per collapse window); the
    other host's idle ticks stay idle meanwhile (before: every tick was a full one); when b
    ticks again and later dies again, a new message."""
    import psycopg

    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = (make_home(tmp_path, name, pg_url, marks, 0) for name in ("a", "b"))
    for home in (a, b):
        with open(home / "scheduler.yaml", "a", encoding="utf-8") as handle:
            handle.write(f"notify:\n  destinations:\n    ops: \"{http_sink.json_url()}\"\n")
        (home / "tasks" / "only-b.md").write_text(render_task(
            "only-b", schedule="0 * * * *", command=f"echo x >> {marks}/ran", hosts=["b"]),
            encoding="utf-8")
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 0
    out = run_cli(a, "tick", "--now", NOW)
    assert "only-b: none of its hosts ticks any more" in out.stdout, out.stdout + out.stderr
    for at in ("10:01", "11:30", "13:05"):  # past the 1 h collapse window too
        run_cli(a, "tick", "--now", f"2026-11-23T{at}:00+00:00")
    assert [m["title"] for m in http_sink.bodies()] == ["mdcron: only-b runs nowhere"]
    age(a)
    assert probe_tick(a, "2026-11-23T13:06:00+00:00") == "CODE 0 PSYCOPG False"  # idle
    assert run_cli(b, "tick", "--now", "2026-11-23T13:07:00+00:00").returncode == 0  # b is back
    assert (marks / "ran").read_text() == "x\n"
    assert probe_tick(a, "2026-11-23T13:08:00+00:00") == "CODE 0 PSYCOPG True"  # state moved
    with psycopg.connect(pg_url, autocommit=True) as conn:  # b silent for 10 minutes
        conn.execute("UPDATE hosts SET seen_at = seen_at - 600 WHERE name = 'b'")
    age(a)
    assert probe_tick(a, "2026-11-23T13:59:00+00:00") == "CODE 0 PSYCOPG False"  # not due yet
    assert probe_tick(a, "2026-11-23T14:00:00+00:00") == "CODE 0 PSYCOPG True"  # due: alert
    assert [m["title"] for m in http_sink.bodies()] == ["mdcron: only-b runs nowhere"] * 2
    age(a)
    assert probe_tick(a, "2026-11-23T14:01:00+00:00") == "CODE 0 PSYCOPG False"


def test_a_task_for_another_host_keeps_a_single_host_idle(home, write_task):
    """SQLite, one host: a due task whose `hosts:` name another host is not run here, so the
    tick stays idle (it used to go the full way every minute)."""
    from test_cache import probe

    write_task("mine", schedule="0 6 * * *", command="true")
    write_task("theirs", schedule="* * * * *", command="true", hosts=["elsewhere"])
    assert run_cli(home, "tick", "--now", NOW).returncode == 0
    age(home)
    code, mods, output = probe(home, "tick", "--now", "2026-11-23T10:01:00+00:00")
    assert (code, mods, output) == (0, set(), "")
    code, mods, _ = probe(home, "tick", "--now", "2026-11-23T10:02:00+00:00", "--dry-run")
    assert "mdcron.run.tick" in mods  # a dry run plans it: the full path says so
    assert history(home) == []


def test_clocks_20_seconds_apart_never_run_a_slot_twice(pg_url, tmp_path):
    """a's clock is 20 s ahead, b's 20 s behind (their `--now`s, a minute of ticks each): each
    (task, slot) runs once; the slot runs on the first host whose clock reaches it, so at most
    20 s early; a host behind never treats a claimed slot as new."""
    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = (make_home(tmp_path, name, pg_url, marks, 5) for name in ("a", "b"))
    for home in (a, b):
        for i in range(5):
            (home / "tasks" / f"t{i:03d}.md").write_text(render_task(
                f"t{i:03d}", schedule="* 10 * * *",
                command=f"echo {home.name} $MDCRON_RUN_ID >> {marks}/t{i:03d}"), encoding="utf-8")
        assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
    for minute in range(3):  # cron on both at 10:0m:00 by the true clock
        ticks = [start_tick(a, f"2026-11-23T10:0{minute}:20+00:00"),
                 start_tick(b, f"2026-11-23T10:0{minute - 1}:40+00:00" if minute else
                            "2026-11-23T09:59:40+00:00")]
        for t in ticks:
            t.communicate(timeout=120)
            assert t.returncode == 0
    rows = [r for r in history(a) if r["status"] != "skipped"]
    slots = Counter((r["task_id"], r["scheduled_for"]) for r in rows)
    assert max(slots.values()) == 1  # never twice
    assert {s for _, s in slots} == {f"2026-11-23T10:0{m}:00+00:00" for m in range(3)}
    assert sum(len(p.read_text().split("\n")) - 1 for p in marks.iterdir()) == len(rows)


@pytest.mark.parametrize("form", ["${PG_URL}", '"${PG_URL}"', "env", "crlf", "pgpassword"])
def test_the_idle_tick_takes_the_common_forms_of_state_url(form, pg_url, tmp_path):
    """`state_url: ${PG_URL}` (quoted or not), $MDCRON_STATE_URL alone, a file with CRLF line
    ends, a password in $PGPASSWORD: the idle tick reads the URL as config does (no psycopg)."""
    from urllib.parse import urlsplit

    marks = tmp_path / "marks"
    marks.mkdir()
    a = make_home(tmp_path, "a", None, marks, 2)
    env = {"PG_URL": pg_url}
    config = "host: a\n"
    if form == "env":
        env = {"MDCRON_STATE_URL": pg_url}
    elif form == "crlf":
        config = f"host: a\r\nstate_url: {pg_url}\r\n"
    elif form == "pgpassword":
        parts = urlsplit(pg_url)
        env["PGPASSWORD"] = parts.password or ""
        bare = pg_url.replace(f":{parts.password}@", "@") if parts.password else pg_url
        config += f"state_url: {bare}\n"
    else:
        config += f"state_url: {form}\n"
    (a / "scheduler.yaml").write_bytes(config.encode())
    full = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")} | env
    out = subprocess.run([sys.executable, str(SCHEDULER), "--home", str(a), "tick", "--now",
                          BEFORE], capture_output=True, text=True, env=full)
    assert out.returncode == 0, out.stdout + out.stderr
    age(a)
    assert probe_tick(a, "2026-11-23T09:59:20+00:00", env) == "CODE 0 PSYCOPG False"


def test_a_spooled_failure_finishes_its_ladder_when_recorded(pg_url, pg_server, tmp_path,
                                                             http_sink):
    """The run fails while the database is unreachable; the next tick records it from the
    spool and does what the ladder would have done with no step left: no late retry, the
    failure counted, the suspension the consecutive-failure rule asks for, its alert once."""

    marks = tmp_path / "marks"
    marks.mkdir()
    a = make_home(tmp_path, "a", pg_url, marks, 0)
    with open(a / "scheduler.yaml", "a", encoding="utf-8") as handle:
        handle.write(f"max_consecutive_failures: 1\nnotify:\n  destinations:\n"
                     f"    ops: \"{http_sink.json_url()}\"\n")
    (a / "tasks" / "job.md").write_text(render_task(
        "job", schedule="0 10 * * *", retry=True, self_heal=False,
        command=f"echo a >> {marks}/ran; while [ ! -e {marks}/release ]; do sleep 0.05; done;"
        " exit 4"), encoding="utf-8")
    assert run_cli(a, "tick", "--now", BEFORE).returncode == 0
    tick = start_tick(a, NOW)
    wait_for_file(marks / "ran")
    with database_refusing(pg_server, pg_url):
        (marks / "release").touch()
        out, err = tick.communicate(timeout=60)
        assert tick.returncode == 2, out + err
    direct = len(http_sink.bodies())  # the tick's direct alert: the database is unusable
    later = run_cli(a, "tick", "--now", "2026-11-23T10:00:30+00:00")
    assert "job: run 1 failed from the spool: suspended: failed 1 ticks in a row" in later.stdout, \
        later.stdout + later.stderr
    rows = history(a)
    assert [(r["kind"], r["status"], r["exit_code"]) for r in rows] == [("run", "failed", 4)]
    assert "recorded late from the spool" in json.dumps(rows[0])
    assert "enabled: false" in (a / "tasks" / "job.md").read_text()
    messages = [b["title"] + b["message"] for b in http_sink.bodies()[direct:]]
    assert len(messages) == 1 and "suspended" in messages[0].lower(), messages
    assert (marks / "ran").read_text().split() == ["a"]  # no late retry


class SocketProxy:
    """PostgreSQL's Unix socket through a relay in `folder` that the test can cut (a network
    partition of one host: its connections drop and new ones fail) and mend."""

    def __init__(self, target_dir: str, folder: Path):
        import socket
        import threading

        self.target = f"{target_dir}/.s.PGSQL.5432"
        self.open, self.conns = True, []
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(folder / ".s.PGSQL.5432"))
        self.server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            self.conns += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src, dst) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        import socket

        self.open = False
        for conn in self.conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self.conns = []

    def mend(self) -> None:
        self.open = True


def test_a_tick_cut_off_past_its_lease_stops_its_task_and_records_nothing(pg_url, tmp_path):
    """A's tick lives but loses the database longer than its lease: it stops its task itself
    (issue 23: its renewals fail), then B takes the task over on its next slot; the fence
    refuses A's late result as the run's."""
    from urllib.parse import parse_qs, urlsplit

    a, b, marks = lease_homes(tmp_path, pg_url)
    real_dir = parse_qs(urlsplit(pg_url).query)["host"][0]
    relay = tmp_path / "relay"
    relay.mkdir()
    proxy = SocketProxy(real_dir, relay)
    config = (a / "scheduler.yaml").read_text(encoding="utf-8")
    (a / "scheduler.yaml").write_text(config.replace(real_dir, str(relay)), encoding="utf-8")
    tick_a = start_tick(a, NOW)
    wait_for_file(marks / "ran")
    proxy.cut()
    give_up = time.monotonic() + 30
    while not lease_of(pg_url)[2]:
        assert time.monotonic() < give_up, "A's lease never expired"
        time.sleep(0.1)
    out = run_cli(b, "tick", "--now", "2026-11-23T10:02:00+00:00")
    assert out.returncode == 0, out.stderr
    proxy.mend()
    out, err = tick_a.communicate(timeout=60)  # its task killed: it was never released
    assert "it stopped the run itself" in err, out + err  # issue 23: before b could take it
    assert "job: skipped" in out and "result not recorded" in out, out + err
    rows = job_rows(b)
    assert [r[:3] for r in rows] == [("a", "lost", "10:00"), ("b", "success", "10:02")]
    assert "host a unreachable since" in rows[0][3]
    assert (marks / "ran").read_text().split() == ["a", "1", "b", "2"]
    back = run_cli(a, "tick", "--now", "2026-11-23T10:02:30+00:00")  # replays a's spool
    assert "its late result was kept from the spool" in back.stdout, back.stdout + back.stderr
    assert "late result from host a: failed" in json.dumps(history(b)[-1])
    assert job_rows(b)[0][1] == "lost"


def test_a_resource_unit_held_on_one_host_is_busy_on_the_others(pg_url, tmp_path):
    """resources: {db: 1} on both hosts: while a's task holds the unit (a lease row), b's task
    that uses db finds it busy and skips; once a's run ended, b's next slot runs."""
    marks = tmp_path / "marks"
    marks.mkdir()
    homes = {}
    for name, task_id, wait in (("a", "load", True), ("b", "report", False)):
        home = make_home(tmp_path, name, pg_url, marks, 0)
        with open(home / "scheduler.yaml", "a", encoding="utf-8") as handle:
            handle.write(f"lease_seconds: {LEASE}\nresources: {{db: 1}}\n")
        loop = f"; while [ ! -e {marks}/release ]; do sleep 0.05; done" if wait else ""
        (home / "tasks" / f"{task_id}.md").write_text(render_task(
            task_id, schedule="* 10 * * *", uses=["db"], on_busy="skip",
            command=f"echo {name} >> {marks}/ran{loop}"), encoding="utf-8")
        assert run_cli(home, "tick", "--now", BEFORE).returncode == 0
        homes[name] = home
    tick_a = start_tick(homes["a"], NOW)
    wait_for_file(marks / "ran")
    out = run_cli(homes["b"], "tick", "--now", "2026-11-23T10:01:00+00:00")
    assert "report: skipped (resource db busy)" in out.stdout, out.stdout + out.stderr
    (marks / "release").touch()
    tick_a.communicate(timeout=60)
    later = run_cli(homes["b"], "tick", "--now", "2026-11-23T10:02:00+00:00")
    assert later.returncode == 0, later.stdout + later.stderr
    rows = [(r["task_id"], r["host"], r["status"], r["scheduled_for"][11:16])
            for r in reversed(history(homes["b"]))]
    assert rows == [("load", "a", "success", "10:00"), ("report", "b", "skipped", "10:01"),
                    ("report", "b", "success", "10:02")]
    assert lease_of(pg_url, "resource:db.0")[0] is None  # released with the run
