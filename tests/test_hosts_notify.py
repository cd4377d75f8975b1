"""Issue 11: alerts with several hosts on one PostgreSQL state. The outbox, the collapse windows
and the held messages are shared: whichever host enqueues, whichever flushes, a message goes
out once, quiet hours end in one digest, and a collapse window counts every host's alerts.
Hosts are separate homes ticking in real processes (see test_hosts.py)."""

from __future__ import annotations

from pathlib import Path

from conftest import render_task, run_cli
from test_hosts import host_pair, make_home, start_tick


def two_hosts(tmp_path: Path, pg_url: str, sink_url: str, extra: str = "") -> tuple[Path, Path]:
    return host_pair(tmp_path, pg_url, tmp_path / "marks",
                     f"timezone: UTC\nmax_consecutive_failures: 10\nnotify:\n"
                     f"  default: ops\n  destinations:\n    ops: \"{sink_url}\"\n{extra}")


def fail_task(home: Path, task_id: str, schedule: str, **fields: object) -> None:
    (home / "tasks" / f"{task_id}.md").write_text(render_task(
        task_id, schedule=schedule, self_heal=False, command="exit 3", **fields),
        encoding="utf-8")


def tick(home: Path, at: str) -> None:
    out = run_cli(home, "tick", "--now", f"2026-11-23T{at}:00+00:00")
    assert out.returncode in (0, 1), out.stdout + out.stderr


def together(homes: tuple[Path, ...], at: str) -> None:
    """Both hosts' ticks started at the same instant, as cron would on synced clocks."""
    ticks = [start_tick(home, at) for home in homes]
    for t in ticks:
        out, err = t.communicate(timeout=120)
        assert t.returncode in (0, 1), out + err


def test_alerts_held_on_two_hosts_end_in_one_digest(pg_url, tmp_path, http_sink):
    """Quiet hours: a's task and b's task fail at 23:00 (held, nothing sent); at 07:00 both
    hosts tick at once and exactly one digest of both goes out, naming both hosts."""
    a, b = two_hosts(tmp_path, pg_url, http_sink.json_url(),
                     '  quiet_hours: "22:00-07:00"\n')
    for home in (a, b):
        fail_task(home, "bad-a", "0 23 * * *", hosts=["a"])
        fail_task(home, "bad-b", "0 23 * * *", hosts=["b"])
        tick(home, "22:59")
    together((a, b), "2026-11-23T23:00:00+00:00")
    together((a, b), "2026-11-23T23:30:00+00:00")
    assert http_sink.bodies() == []  # held
    together((a, b), "2026-11-24T07:00:00+00:00")
    together((a, b), "2026-11-24T07:01:00+00:00")
    bodies = http_sink.bodies()
    assert [m["title"] for m in bodies] == ["mdcron: 2 notifications held during quiet hours"]
    assert "bad-a" in bodies[0]["message"] and "bad-b" in bodies[0]["message"]


def test_a_collapse_window_counts_the_alerts_of_every_host(pg_url, tmp_path, http_sink):
    """One task failing every minute, run by a (09:59, its first tick), a, b, a, then by
    whichever wins a concurrent tick: one message in the hour, and the next window's message
    counts the four collapsed on both hosts."""
    a, b = two_hosts(tmp_path, pg_url, http_sink.json_url())
    for home in (a, b):
        fail_task(home, "flaky", "* * * * *")
        tick(home, "09:59")
    tick(a, "10:00")
    tick(b, "10:01")
    tick(a, "10:02")
    together((a, b), "2026-11-23T10:03:00+00:00")
    assert len(http_sink.bodies()) == 1
    tick(b, "11:00")  # the window opened at 09:59 is over
    tick(a, "11:00")
    bodies = http_sink.bodies()
    assert len(bodies) == 2, [m["message"] for m in bodies]
    assert bodies[0]["message"].endswith("(host a)")
    assert "(+4 similar alerts since 09:59 collapsed)" in bodies[1]["message"]
    assert bodies[1]["message"].endswith("(host b)")


def test_a_host_without_the_destination_leaves_the_message_to_one_that_has_it(
        pg_url, tmp_path, http_sink):
    """a names `ops`, b has no notify section. a's first try fails (HTTP 500, retried in a
    minute); b's tick comes first after that: it must not take the message for undeliverable
    (dead), but leave it to a, whose next tick sends it."""
    import psycopg

    marks = tmp_path / "marks"
    marks.mkdir()
    a, b = (make_home(tmp_path, name, pg_url, marks, 0) for name in ("a", "b"))
    with open(a / "scheduler.yaml", "a", encoding="utf-8") as handle:
        handle.write(f"notify:\n  default: ops\n  destinations:\n"
                     f"    ops: \"{http_sink.json_url()}\"\n")
    for home in (a, b):
        fail_task(home, "bad", "0 10 * * *", hosts=["a"])
        tick(home, "09:59")
    http_sink.fail_next(1)
    tick(a, "10:00")
    tick(b, "10:02")
    tick(a, "10:02")
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT status FROM outbox").fetchall() == [("sent",)]
    assert len(http_sink.bodies()) == 2  # the failed try, then the message


def test_each_host_pings_its_own_heartbeat_on_full_and_idle_ticks(pg_url, tmp_path, http_sink):
    """Each host's scheduler.yaml names its own heartbeat_url (README: a URL shared by all would
    stay green while any host lives): both hosts' ticks, full then idle, ping their own URL."""
    a, b = two_hosts(tmp_path, pg_url, http_sink.json_url())
    for home in (a, b):
        with open(home / "scheduler.yaml", "a", encoding="utf-8") as handle:
            handle.write(f'heartbeat_url: "{http_sink.url("/beat-" + home.name)}"\n')
        (home / "tasks" / "daily.md").write_text(render_task(
            "daily", schedule="0 6 * * *", command="true"), encoding="utf-8")
    for at in ("10:00", "10:01"):  # the first tick is full, the second idle
        tick(a, at)
        tick(b, at)
    pings = [r.path for r in http_sink.requests if r.path.startswith("/beat-")]
    assert sorted(pings) == ["/beat-a", "/beat-a", "/beat-b", "/beat-b"]
