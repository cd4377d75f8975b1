"""Issue 28 (mutation testing): the task lock as the next tick, `list` and a person see it. The
holder record read back; who counts as the holder (pid AND start time AND boot: a reused pid
never passes); when a live holder is stale (deadline + 60 s, on the monotonic clock of its
boot); what a stale holder's kill touches (its group, what left it, a hung tick; never a
bystander, never the tick doing the kill); the lock file itself (real flocks, descriptors,
folders). Real processes and real signals throughout."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mdcron.core.clock import monotonic
from mdcron.core.lock_info import INFO_LIMIT
from mdcron.core.records import replace
from mdcron.run import locks
from mdcron.run.locks import (
    LockInfo,
    TaskLock,
    boot_id,
    holder_alive,
    is_stale,
    kill_holder,
    kill_leftovers,
    kill_process_group_or_pid,
    lock_path,
    process_matches,
    process_start_time,
    read_info,
    run_lock_path,
    stop_run_tree,
)

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc and flock: Linux only")

WALL = 1_800_000_000.0


def info(**changes) -> LockInfo:
    base = LockInfo(task_id="job", run_id=7, tick_pid=0, tick_start=None, boot_id=boot_id(),
                    pgid=None, child_start=None, started_at=WALL, deadline=WALL + 300)
    return replace(base, **changes)


def dead_pid() -> int:
    """A pid that was a process of ours and is gone (reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def bridged_env() -> dict[str, str]:
    """This tree on the subprocess's path, keeping what is already there (under mutmut, the
    hook that tells which functions a subprocess called)."""
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def wait_for(check, what: str, timeout: float = 30.0) -> None:
    give_up = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < give_up, f"{what} never happened"
        time.sleep(0.02)


# A process that is NOT our child (its parent, the wrapper, reaps it the moment it dies: as a
# real tick's task or a cron-started tick is reaped by someone else). argv: session (1: its own
# group, as a task; 0: in the wrapper's, as a tick), ignore TERM (1/0), uid (-1: ours), mark.
WRAPPER = r"""
import os, subprocess, sys
session, ignore, user = sys.argv[1] == "1", sys.argv[2] == "1", int(sys.argv[3])
env = dict(os.environ)
if len(sys.argv) > 4:
    env["MDCRON_RUN"] = sys.argv[4]
code = ("trap '' TERM; " if ignore else "") + "echo ready; exec sleep 300"
child = subprocess.Popen(["/bin/sh", "-c", code], stdout=subprocess.PIPE,
                         start_new_session=session, env=env,
                         user=user if user >= 0 else None, cwd="/")
child.stdout.readline()
print(child.pid, flush=True)
child.wait()
"""


class Proc:
    """One such process: .pid, .start (its start time as the lock records it)."""

    def __init__(self, *, session: bool, ignore_term: bool = False, mark: str | None = None,
                 user: int | None = None):
        argv = [sys.executable, "-c", WRAPPER, str(int(session)), str(int(ignore_term)),
                str(user if user is not None else -1)]
        self.wrapper = subprocess.Popen(argv + ([mark] if mark else []), stdout=subprocess.PIPE,
                                        text=True)
        self.pid = int(self.wrapper.stdout.readline())  # type: ignore[union-attr]
        self.start = process_start_time(self.pid)

    def alive(self) -> bool:
        return process_start_time(self.pid) == self.start

    def gone(self, timeout: float = 30.0) -> None:
        wait_for(lambda: not self.alive(), f"the end of pid {self.pid}", timeout)

    def close(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.wrapper.wait(30)
        self.wrapper.stdout.close()  # type: ignore[union-attr]


@pytest.fixture
def procs():
    made: list[Proc] = []

    def make(**kw) -> Proc:
        made.append(Proc(**kw))
        return made[-1]

    yield make
    for proc in made:
        proc.close()


# ================================================================ the record


def test_a_holder_record_reads_back_as_written(tmp_path):
    full = info(tick_pid=12, tick_start=34, pgid=56, child_start=78, mark="7.abc",
                cgroup="/sys/fs/cgroup/mdcron-7.abc", uid=1000, mono_deadline=123.5)
    text = full.to_json()
    assert list(json.loads(text)) == sorted(json.loads(text))  # one stable order for people
    assert LockInfo.from_json(text) == full
    plain = LockInfo("job", None, 12, None, None, None, None, WALL, WALL + 1)
    assert (plain.mark, plain.cgroup, plain.uid, plain.mono_deadline) == (None,) * 4
    assert LockInfo.from_json(plain.to_json()) == plain


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"task_id": "job"}',
                                  json.dumps({**json.loads(info().to_json()), "extra": 1})])
def test_a_record_that_is_not_a_holder_reads_as_none(text):
    assert LockInfo.from_json(text) is None


def test_lock_files_are_named_after_the_task_and_the_run(tmp_path):
    assert lock_path(tmp_path, "job.daily") == tmp_path / "job.daily.lock"
    assert run_lock_path(tmp_path, "job", 42) == tmp_path / "job@42.lock"


def test_read_info_reads_what_the_lock_holds_and_nothing_else(tmp_path):
    path = tmp_path / "job.lock"
    assert read_info(path) is None  # no file
    path.write_text(info(tick_pid=5).to_json())
    assert read_info(path) == info(tick_pid=5)
    for junk in (b"", b"  \n", b"\xff\xfe{", b"{broken"):
        path.write_bytes(junk)
        assert read_info(path) is None, junk
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)
    assert read_info(fifo) is None  # never waited on
    link = tmp_path / "link.lock"
    link.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text(info().to_json())
    assert read_info(link) is None  # never followed


def test_a_record_is_read_up_to_its_bound_and_no_further(tmp_path):
    """A lock file grown past INFO_LIMIT (64 KiB; a record is ~300 bytes) is not read whole."""
    path = tmp_path / "job.lock"
    short = len(info(mark="").to_json())
    assert INFO_LIMIT == 64 * 1024
    path.write_text(info(mark="x" * (INFO_LIMIT + 1 - short)).to_json())  # limit + 1 bytes
    assert path.stat().st_size == INFO_LIMIT + 1
    assert read_info(path) is not None
    path.write_text(info(mark="x" * (INFO_LIMIT + 2 - short)).to_json())
    assert read_info(path) is None


# ================================================================ who the holder is


def test_boot_id_is_this_boots(tmp_path):
    assert boot_id() == Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def _clock_ticks_since_boot_at(when: float) -> float:
    btime = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                 if line.startswith("btime "))
    return (when - btime) * os.sysconf("SC_CLK_TCK")


def test_a_process_start_time_is_when_it_started(tmp_path):
    """Even for a command named with spaces and parentheses (field 2 of /proc/<pid>/stat)."""
    odd = tmp_path / "a) b (c"
    odd.symlink_to("/bin/sleep")
    before = time.time()
    proc = subprocess.Popen([str(odd), "300"])
    try:
        wait_for(lambda: Path(f"/proc/{proc.pid}/comm").read_text().startswith("a) b"),
                 "the exec")
        start = process_start_time(proc.pid)
        tck = os.sysconf("SC_CLK_TCK")
        assert isinstance(start, int)
        assert _clock_ticks_since_boot_at(before) - 2 * tck <= start
        assert start <= _clock_ticks_since_boot_at(time.time()) + 2 * tck
    finally:
        proc.kill()
        proc.wait()
    assert process_start_time(proc.pid) is None  # gone
    own = process_start_time(os.getpid())
    assert own is not None and own <= start


def test_the_holder_is_matched_by_pid_start_and_boot():
    me, start = os.getpid(), process_start_time(os.getpid())
    assert process_matches(me, start, boot_id())
    assert process_matches(me, None, None)  # an old record without the details
    assert process_matches(me, start, None)
    assert not process_matches(me, start + 1, boot_id())  # pid reuse: another process
    assert not process_matches(me, start, "another-boot")
    assert not process_matches(dead_pid(), None, None)
    assert not process_matches(dead_pid(), start, boot_id())
    assert process_matches(1, process_start_time(1), boot_id())  # any live pid, even 1
    for nobody in (None, 0, -1):  # kill(0, 0) and kill(-1, 0) would "succeed"
        assert not process_matches(nobody, None, None)


def test_a_holder_is_alive_while_its_tick_or_its_task_runs(procs):
    assert not holder_alive(None)
    tick, task = procs(session=False), procs(session=True)
    both = info(tick_pid=tick.pid, tick_start=tick.start, pgid=task.pid,
                child_start=task.start)
    assert holder_alive(both)
    assert holder_alive(replace(both, tick_pid=dead_pid()))  # the tick died (-9), the task not
    assert holder_alive(replace(both, pgid=None))
    assert not holder_alive(replace(both, tick_pid=dead_pid(), pgid=dead_pid()))
    assert not holder_alive(replace(both, tick_start=tick.start + 1, pgid=None))  # reused pid
    assert not holder_alive(replace(both, tick_pid=dead_pid(), child_start=task.start + 1))
    assert not holder_alive(replace(both, boot_id="another-boot"))  # nothing survives a reboot


def test_a_zombie_holds_nothing(tmp_path):
    """An orphan's zombie lingers where PID 1 does not reap: it is no holder (issue 21). Its
    name may hold ') ' too (its state is read after the last one)."""
    odd = tmp_path / "x) Y (z"
    odd.symlink_to("/bin/true")
    proc = subprocess.Popen([str(odd)])
    wait_for(lambda: Path(f"/proc/{proc.pid}/stat").read_text().split(")")[-1].split()[0]
             == "Z", "the zombie")
    try:
        start = process_start_time(proc.pid)
        assert start is not None and process_matches(proc.pid, start, boot_id())
        assert not holder_alive(info(tick_pid=proc.pid, tick_start=start))
        assert not holder_alive(info(tick_pid=dead_pid(), pgid=proc.pid, child_start=start))
    finally:
        proc.wait()


# The same questions where /proc cannot be read (a private mount namespace with an empty
# /proc): identity falls back to kill(pid, 0), and a recorded start time cannot be proved.
NO_PROC = r"""
import os, subprocess, sys
from mdcron.run.locks import LockInfo, boot_id, holder_alive, process_matches
gone = subprocess.Popen(["/bin/true"]); gone.wait()
me = os.getpid()
rec = dict(task_id="job", run_id=1, tick_start=None, boot_id="b", pgid=None,
           child_start=None, started_at=0.0, deadline=0.0)
print(boot_id(), process_matches(me, None, "some-boot"), process_matches(me, 123, None),
      process_matches(gone.pid, None, None), holder_alive(LockInfo(tick_pid=me, **rec)),
      holder_alive(LockInfo(tick_pid=gone.pid, **rec)))
os.setresuid(65534, 65534, 0)  # pid 1 is root's: kill(1, 0) is refused, yet it exists
seen = process_matches(1, None, None), process_matches(1, 5, None)  # (nor can we kill it)
os.setresuid(0, 0, 0)  # root again before exit (under mutmut its hook writes where root may)
print(*seen)
"""


def test_without_proc_the_holder_is_judged_by_kill_zero():
    if os.geteuid() != 0:
        pytest.skip("needs root: a mount namespace with /proc hidden, then setuid")
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount -t tmpfs none /proc && exec "$0" -c "$1"', sys.executable, NO_PROC],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        env=bridged_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "True", "False", "False", "True", "False",
                                  "True", "True"]


# ================================================================ stale


def test_a_holder_is_stale_only_past_its_deadline_plus_the_grace():
    mono = monotonic()
    # 50 s past the deadline is inside the grace with ten seconds to spare on a loaded machine
    for past, stale in ((0.0, False), (50.0, False), (61.0, True), (3600.0, True)):
        rec = info(mono_deadline=mono - past)
        assert is_stale(rec, now=0.0) is stale, past  # the wall clock does not decide
    fresh = info(mono_deadline=mono + 300, deadline=WALL)
    assert not is_stale(fresh, now=WALL + 10**6)  # a clock set forward, a `tick --now` replay


def test_a_record_from_another_boot_is_never_stale():
    long_ago = monotonic() - 10**6
    assert not is_stale(info(mono_deadline=long_ago, boot_id="another-boot"), now=0.0)
    assert is_stale(info(mono_deadline=long_ago, boot_id=None), now=0.0)  # no boot: its clock
    assert is_stale(info(mono_deadline=long_ago), now=0.0)


def test_an_old_record_falls_back_to_the_wall_clock_with_the_same_grace():
    old = info(mono_deadline=None, deadline=WALL, boot_id="another-boot")
    assert not is_stale(old, WALL + 59.5)
    assert not is_stale(old, WALL + 60)
    assert is_stale(old, WALL + 60.5)
    assert not is_stale(old, WALL - 1000)


# ================================================================ killing a stale holder


def test_a_stale_holder_loses_its_group_and_its_hung_tick(procs):
    task = procs(session=True)
    tick = procs(session=False, ignore_term=True)  # hung: only SIGKILL ends it
    rec = info(tick_pid=tick.pid, tick_start=tick.start, pgid=task.pid, child_start=task.start)
    done = kill_holder(rec, grace=0.3)
    assert done == [f"killed task process group {task.pid}", f"killed hung tick {tick.pid}"]
    task.gone()
    tick.gone()
    assert not holder_alive(rec)


def test_a_stale_kill_spares_a_process_that_reused_the_pids(procs):
    task, tick = procs(session=True), procs(session=False)
    rec = info(tick_pid=tick.pid, tick_start=tick.start + 1, pgid=task.pid,
               child_start=task.start + 1)
    assert kill_holder(rec, grace=0.3) == []
    assert task.alive() and tick.alive()
    assert kill_holder(replace(rec, boot_id="another-boot", tick_start=tick.start,
                               child_start=task.start), grace=0.3) == []
    assert task.alive() and tick.alive()


SELF = r"""
import os
from mdcron.run.locks import LockInfo, boot_id, kill_holder, process_start_time
me = os.getpid()
print(kill_holder(LockInfo("job", 1, me, process_start_time(me), boot_id(), None, None, 0.0,
                           0.0), 0.3))
"""


def test_the_tick_doing_the_kill_never_kills_itself():
    """A record naming the very tick that reads it (it took the lock over): not killed."""
    out = subprocess.run([sys.executable, "-c", SELF], cwd=REPO, capture_output=True,
                         text=True, timeout=60, env=bridged_env())
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr


def test_what_left_the_group_is_killed_by_its_mark(procs):
    mark = f"7.{os.urandom(8).hex()}"
    task = procs(session=True, mark=mark)
    escaped = procs(session=True, mark=mark)  # setsid: out of the task's group
    also = procs(session=True, mark=mark)
    bystander = procs(session=True, mark="8.00")
    rec = info(tick_pid=dead_pid(), pgid=task.pid, child_start=task.start, mark=mark)
    done = kill_holder(rec, grace=0.3)
    assert done[0] == f"killed task process group {task.pid}"
    first, second = sorted([escaped.pid, also.pid])
    assert re.fullmatch(rf"killed what left its group: pid {first} \(.+\), pid {second} \(.+\)",
                        done[1], re.DOTALL), done[1]
    assert len(done) == 2
    escaped.gone()
    also.gone()
    assert bystander.alive()


def test_leftovers_are_swept_only_for_a_marked_run_of_this_boot(procs):
    mark = f"9.{os.urandom(8).hex()}"
    left = procs(session=True, mark=mark)
    assert kill_leftovers(info(mark=None, child_start=left.start), 0.3) == []
    assert kill_leftovers(info(mark=mark, child_start=left.start, boot_id="another-boot"),
                          0.3) == []
    assert left.alive()
    swept = kill_leftovers(info(mark=mark, child_start=left.start, boot_id=None), 0.3)
    assert len(swept) == 1 and swept[0].startswith(f"pid {left.pid} (")
    left.gone()


def test_a_marked_process_older_than_the_run_is_not_its_leftover(procs):
    mark = f"11.{os.urandom(8).hex()}"
    older = procs(session=True, mark=mark)  # carries the mark, yet started before the run
    task = procs(session=True)
    assert task.start > older.start
    assert kill_leftovers(info(mark=mark, child_start=task.start), 0.3) == []
    assert older.alive()


def test_leftovers_of_a_run_as_another_user_are_that_users(procs):
    if os.geteuid() != 0:
        pytest.skip("needs root: a run as another user (`user:`)")
    mark = f"12.{os.urandom(8).hex()}"
    left = procs(session=True, mark=mark, user=65534)
    mine = procs(session=True, mark=mark)  # the mark forged by another user's process
    swept = kill_leftovers(info(mark=mark, child_start=left.start, uid=65534), 0.3)
    assert [s.split(" (")[0] for s in swept] == [f"pid {left.pid}"]
    left.gone()
    assert mine.alive()


def test_leftovers_in_the_runs_cgroup_go_without_a_mark(tmp_path):
    from mdcron.run.proctree import Tree

    tree = Tree.open(13)
    if tree.cgroup is None:
        pytest.skip("no cgroup v2 this process may create run cgroups in")
    proc = subprocess.Popen(["sleep", "300"], preexec_fn=tree.preexec(), start_new_session=True)
    try:
        wait_for(lambda: str(proc.pid) in (tree.cgroup / "cgroup.procs").read_text(), "join")
        rec = info(mark=tree.mark, cgroup=str(tree.cgroup),
                   child_start=process_start_time(proc.pid))
        swept = kill_leftovers(rec, 0.3)
        assert [s.split(" (")[0] for s in swept] == [f"pid {proc.pid}"]
        assert proc.wait(30) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        tree.close()


def test_replace_stops_the_runs_processes_but_never_its_tick(procs):
    mark = f"10.{os.urandom(8).hex()}"
    task = procs(session=True, mark=mark)
    escaped = procs(session=True, mark=mark)
    tick = procs(session=False)
    rec = info(tick_pid=tick.pid, tick_start=tick.start, pgid=task.pid, child_start=task.start,
               mark=mark)
    done = stop_run_tree(rec, grace=0.3)
    assert done[0] == f"stopped process group {task.pid}"
    assert len(done) == 2 and done[1].startswith(f"pid {escaped.pid} (")
    task.gone()
    escaped.gone()
    assert tick.alive()
    other = procs(session=True)
    spared = replace(rec, pgid=other.pid, child_start=other.start, mark=None)
    assert stop_run_tree(replace(spared, child_start=other.start + 1), 0.3) == []  # reused pid
    assert stop_run_tree(replace(spared, boot_id="another-boot"), 0.3) == []
    assert other.alive()


def test_a_tick_that_obeys_term_is_not_kept_waiting_for_the_grace(procs):
    tick = procs(session=False)
    began = time.monotonic()
    kill_process_group_or_pid(tick.pid, grace=60)
    assert time.monotonic() - began < 30
    assert not tick.alive()
    kill_process_group_or_pid(dead_pid(), grace=60)  # gone already: nothing to wait for
    assert time.monotonic() - began < 30


def test_a_tick_that_ignores_term_gets_its_grace_then_sigkill(procs):
    tick = procs(session=False, ignore_term=True)
    began = time.monotonic()
    kill_process_group_or_pid(tick.pid, grace=0.5)
    assert time.monotonic() - began >= 0.5
    tick.gone()


# ================================================================ the lock file


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def other_process_can_lock(path: Path) -> bool:
    return subprocess.run(["flock", "-n", str(path), "true"]).returncode == 0


def test_a_lock_is_held_until_released_and_its_record_goes_with_it(tmp_path):
    path = tmp_path / "state" / "locks" / "job.lock"
    before = open_fds()
    lock = TaskLock(path)
    assert not lock.held
    assert lock.try_acquire() is True
    assert lock.held and isinstance(lock.fileno(), int)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not other_process_can_lock(path)
    second = TaskLock(path)
    assert second.try_acquire() is False and not second.held
    assert open_fds() - before == {str(lock.fileno()), str(lock._writer)}  # none leaked
    lock.write(info(tick_pid=os.getpid(), mark="7.long-mark-" + "x" * 50))
    lock.write(info(tick_pid=os.getpid()))  # a shorter record replaces it whole
    assert read_info(path) == info(tick_pid=os.getpid())
    lock.release()
    assert not lock.held and path.read_text() == "" and read_info(path) is None
    assert open_fds() == before
    assert other_process_can_lock(path)
    lock.release()  # twice: nothing happens
    assert second.try_acquire() is True
    second.release()


def test_a_lock_not_held_can_neither_be_written_nor_handed_on(tmp_path):
    lock = TaskLock(tmp_path / "job.lock")
    with pytest.raises(RuntimeError, match="^lock not held$"):
        lock.write(info())
    with pytest.raises(RuntimeError, match="^lock not held$"):
        lock.fileno()


def test_the_descriptor_a_task_inherits_cannot_rewrite_the_record(tmp_path):
    """Issue 21: a task (maybe running as another user) inherits the lock's descriptor; it is
    read-only, so the record a later root tick trusts to kill a stale holder stays the tick's."""
    path = tmp_path / "job.lock"
    lock = TaskLock(path)
    assert lock.try_acquire()
    try:
        lock.write(info(tick_pid=os.getpid()))
        fd = lock.fileno()
        code = ("import os, sys\ntry:\n    os.write(int(sys.argv[1]), b'{}')\n"
                "except OSError:\n    sys.exit(7)")
        child = subprocess.run([sys.executable, "-S", "-c", code, str(fd)], pass_fds=(fd,))
        assert child.returncode == 7
        assert not other_process_can_lock(path)
        assert read_info(path) == info(tick_pid=os.getpid())
    finally:
        lock.release()


def test_a_lock_under_the_home_is_not_taken_through_a_symlinked_folder(tmp_path):
    home = tmp_path / "home"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / "state").mkdir(parents=True)
    (home / "state" / "locks").symlink_to(elsewhere)
    lock = TaskLock(home / "state" / "locks" / "job.lock", root=home)
    before = open_fds()
    with pytest.raises(OSError, match="locks"):
        lock.try_acquire()
    assert not lock.held and list(elsewhere.iterdir()) == [] and open_fds() == before
    safe = TaskLock(tmp_path / "home2" / "state" / "locks" / "job.lock", root=tmp_path / "home2")
    (tmp_path / "home2").mkdir()
    assert safe.try_acquire()
    assert (tmp_path / "home2" / "state" / "locks" / "job.lock").is_file()
    safe.release()


def test_a_lock_file_swapped_for_a_symlink_is_refused_by_its_full_name(tmp_path):
    path = tmp_path / "locks" / "job.lock"
    path.parent.mkdir()
    path.symlink_to(tmp_path / "target")
    with pytest.raises(OSError) as caught:
        TaskLock(path).try_acquire()
    assert str(caught.value).startswith(f"{path} is a symlink")
    assert not (tmp_path / "target").exists()


def test_a_home_reached_through_a_symlink_still_locks(tmp_path):
    """The home (like a folder given without one) may itself be a link: /home/u -> /data/u;
    only the names under it are walked without following."""
    (tmp_path / "real" / "state").mkdir(parents=True)
    (tmp_path / "home").symlink_to(tmp_path / "real")
    lock = TaskLock(tmp_path / "home" / "state" / "locks" / "job.lock", root=tmp_path / "home")
    assert lock.try_acquire()
    lock.release()
    assert (tmp_path / "real" / "state" / "locks" / "job.lock").is_file()
    bare = TaskLock(tmp_path / "home" / "state" / "locks" / "bare.lock")
    assert bare.try_acquire()
    bare.release()
    assert (tmp_path / "real" / "state" / "locks" / "bare.lock").is_file()


WRITE_ONLY = r"""
import os, sys
from pathlib import Path
from mdcron.run.locks import TaskLock, lock_path
lock_path(Path("/"), "warm")  # (under mutmut: its hook loads its config while still root)
before = sorted(os.listdir("/proc/self/fd"))
os.setegid(65534); os.seteuid(65534)  # only the effective ids: what opening files checks
try:
    TaskLock(Path(sys.argv[1])).try_acquire()
    caught = "nothing"
except OSError as exc:
    caught = type(exc).__name__
os.seteuid(0); os.setegid(0)
print(caught, sorted(os.listdir("/proc/self/fd")) == before)
"""


def test_a_lock_file_it_cannot_read_is_an_error_that_leaks_no_descriptor():
    if os.geteuid() != 0:
        pytest.skip("needs root: the test switches to another user")
    folder = Path(tempfile.mkdtemp(prefix="mdcron-locks-"))  # reachable by that user
    try:
        folder.chmod(0o755)
        path = folder / "job.lock"
        path.write_text("")
        path.chmod(0o200)  # writable, not readable: the second open fails, the first closes
        for made in (folder, path):
            os.chown(made, 65534, 65534)
        out = subprocess.run([sys.executable, "-c", WRITE_ONLY, str(path)], cwd=REPO,
                             timeout=60, capture_output=True, text=True, env=bridged_env())
        assert out.stdout.split() == ["PermissionError", "True"], out.stderr
    finally:
        shutil.rmtree(folder)


def test_portalocker_takes_the_same_lock_where_flock_is_not_direct(tmp_path, monkeypatch):
    """The other platforms' path (portalocker), on the same file: they exclude each other."""
    path = tmp_path / "job.lock"
    monkeypatch.setattr(locks, "FLOCK_DIRECT", False)
    via_portalocker = TaskLock(path)
    assert via_portalocker.try_acquire()
    assert not other_process_can_lock(path)
    monkeypatch.setattr(locks, "FLOCK_DIRECT", True)
    assert not TaskLock(path).try_acquire()
    monkeypatch.setattr(locks, "FLOCK_DIRECT", False)
    assert not TaskLock(path).try_acquire()
    via_portalocker.release()
    assert other_process_can_lock(path)
