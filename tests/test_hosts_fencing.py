"""Issue 23, items 2 and 4: a host cut off from PostgreSQL past its lease stops its own task
before another host may take the lease (no two copies at once), and the run it could not finish
in the database is recorded as `lost` by the host that took over, with one alert, its real
result kept beside the row when the cut-off host reports it.

The cut is a frozen relay: host a reaches PostgreSQL's socket through a relay that the test
stops forwarding (bytes are held, nothing is refused: a psycopg call blocks, as over a network
that silently drops packets) and later lets flow again."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from conftest import render_task, run_cli
from test_hosts import BEFORE, NOW, history, host_pair, job_rows, start_tick, wait_for_file

LEASE = 5.0  # seconds: a fences itself 4 s after its last renewal, b may take it at 5.5 s (1.5 s
# between: a loaded machine may wake the fencing thread late)


class FrozenRelay:
    """PostgreSQL's Unix socket through a relay in `folder` that can be frozen: while frozen it
    forwards nothing and connects nothing (held, not refused); thawed, everything flows."""

    def __init__(self, target_dir: str, folder: Path):
        self.target = f"{target_dir}/.s.PGSQL.5432"
        self.flowing = threading.Event()
        self.flowing.set()
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(folder / ".s.PGSQL.5432"))
        self.server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._join, args=(client,), daemon=True).start()

    def _join(self, client: socket.socket) -> None:
        self.flowing.wait()
        upstream = socket.socket(socket.AF_UNIX)
        upstream.connect(self.target)
        for src, dst in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self.flowing.wait()  # frozen: the bytes wait here
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def freeze(self) -> None:
        self.flowing.clear()

    def thaw(self) -> None:
        self.flowing.set()


def fenced_hosts(tmp_path: Path, pg_url: str, commands: dict[str, str],
                 extra: str = "") -> tuple[Path, Path, Path, FrozenRelay]:
    """Hosts a (through a frozen-able relay) and b, task `job` every minute of 10:00 with its
    command per host, leases of LEASE seconds; both have seen the task at 09:59."""
    marks = tmp_path / "marks"
    a, b = host_pair(tmp_path, pg_url, marks, f"lease_seconds: {LEASE}\n{extra}")
    real_dir = parse_qs(urlsplit(pg_url).query)["host"][0]
    folder = tmp_path / "relay"
    folder.mkdir()
    relay = FrozenRelay(real_dir, folder)
    config = (a / "scheduler.yaml").read_text(encoding="utf-8")
    (a / "scheduler.yaml").write_text(config.replace(real_dir, str(folder)), encoding="utf-8")
    for home in (a, b):
        (home / "tasks" / "job.md").write_text(render_task(
            "job", schedule="* 10 * * *", timeout=60, self_heal=False,
            command=commands[home.name]), encoding="utf-8")
        out = run_cli(home, "tick", "--now", BEFORE)
        assert out.returncode == 0, out.stdout + out.stderr
    return a, b, marks, relay


def tick_b_until_it_runs(b: Path, deadline: float = 60.0) -> None:
    """b ticks at 10:01, 10:02, ... until one of its ticks took the lease and ran the task."""
    give_up = time.monotonic() + deadline
    for minute in range(1, 60):
        out = run_cli(b, "tick", "--now", f"2026-11-23T10:{minute:02d}:00+00:00")
        assert out.returncode == 0, out.stdout + out.stderr
        if any(r[0] == "b" and r[1] != "skipped" for r in job_rows(b)):
            return
        assert time.monotonic() < give_up, f"b never took the lease: {job_rows(b)}"
    raise AssertionError("b never took the lease")


def marks_of(path: Path) -> dict[str, list[float]]:
    seen: dict[str, list[float]] = {"a": [], "b": []}
    for line in path.read_text(encoding="utf-8").splitlines():
        host, at = line.split()
        seen[host].append(float(at))
    return seen


def test_a_cut_off_holder_stops_its_task_before_another_host_starts_one(pg_url, tmp_path):
    """a's task appends a timestamp every 0.2 s until killed; a's relay freezes; b ticks until
    it takes the lease and runs its own copy (tagged b, 2 s). a's last mark comes before b's
    first (0 s of overlap), and a killed its task itself while still cut off."""
    from mdcron.run.locks import read_info
    from mdcron.run.process import group_alive

    marks_file = tmp_path / "marks" / "marks"
    mark = f"echo \"$H $(date +%s.%N)\" >> {marks_file}; sleep 0.2"
    a, b, marks, relay = fenced_hosts(tmp_path, pg_url, {
        "a": f"H=a; while true; do {mark}; done",
        "b": f"H=b; for i in 1 2 3 4 5 6 7 8 9 10; do {mark}; done"})
    tick_a = start_tick(a, NOW)
    try:
        wait_for_file(marks_file)
        info = read_info(a / "state" / "locks" / "job.lock")
        give_up = time.monotonic() + 30
        while info is None or info.pgid is None:
            assert time.monotonic() < give_up, "a's task never recorded its process group"
            info = read_info(a / "state" / "locks" / "job.lock")
        relay.freeze()
        tick_b_until_it_runs(b)
        assert not group_alive(info.pgid), "a's task still runs while a is cut off"
        seen = marks_of(marks_file)
        assert seen["a"] and len(seen["b"]) == 10, seen
        print(f"a's last mark to b's first: {min(seen['b']) - max(seen['a']):.2f} s")
        assert max(seen["a"]) < min(seen["b"]), (
            f"two copies at once: a's last mark {max(seen['a'])}, b's first {min(seen['b'])}")
    finally:
        relay.thaw()
    out, err = tick_a.communicate(timeout=120)
    assert "it stopped the run itself" in err, out + err
    assert "killed task process group" in err, out + err


def test_work_done_during_a_cut_off_is_recorded_as_lost_with_its_late_result(
        pg_url, tmp_path, http_sink):
    """a's task succeeds while a is cut off longer than the lease. b takes the task over:
    a's row says `lost`, "host a unreachable since …", one alert. When a's relay thaws, a's
    real result (success) is kept beside the row, and `show` prints it."""
    marks = tmp_path / "marks"
    sink = f"notify:\n  destinations:\n    ops: \"{http_sink.json_url()}\"\n"
    a, b, marks, relay = fenced_hosts(tmp_path, pg_url, {
        "a": f"echo a >> {marks}/ran; while [ ! -e {marks}/go ]; do sleep 0.05; done",
        "b": f"echo b >> {marks}/ran"}, extra=sink)
    tick_a = start_tick(a, NOW)
    try:
        wait_for_file(marks / "ran")
        relay.freeze()
        (marks / "go").touch()  # a's task succeeds now, while a cannot tell the database
        tick_b_until_it_runs(b)
        rows = job_rows(b)
        assert rows[0][:3] == ("a", "lost", "10:00"), rows
        assert rows[0][3].startswith("lost: host a unreachable since "), rows[0]
        assert rows[-1][:2] == ("b", "success"), rows
        lost = [m for m in http_sink.bodies() if " lost" in m["title"]]
        assert len(lost) == 1 and "host a unreachable since" in lost[0]["message"], lost
    finally:
        relay.thaw()
    out, err = tick_a.communicate(timeout=120)
    assert tick_a.returncode == 0, out + err
    assert "late result (success) is kept as a note on run 1" in out, out + err
    first = history(b)[-1]
    assert (first["host"], first["status"]) == ("a", "lost")
    assert "late result from host a: success after" in str(first), first
    shown = run_cli(b, "history", "--task", "job", "--wide")  # `show` has the last 3 runs
    words = " ".join(shown.stdout.split())
    assert "late result from host a: success" in words, shown.stdout + shown.stderr
    assert len([m for m in http_sink.bodies() if " lost" in m["title"]]) == 1
