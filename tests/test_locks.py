"""The task lock taken through fcntl on Linux is portalocker's lock: they exclude each other,
both ways, between real processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mdcron.run import locks

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not locks.FLOCK_DIRECT, reason="fcntl path is Linux only")

# Holds the lock (by `how`) until stdin closes; prints HELD or BUSY first.
HOLDER = """
import sys
from pathlib import Path
how, path = sys.argv[1], sys.argv[2]
if how == "portalocker":
    import portalocker
    fh = open(path, "a+")
    try:
        portalocker.lock(fh, portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING)
        ok = True
    except portalocker.exceptions.LockException:
        ok = False
else:
    from mdcron.run.locks import TaskLock
    lock = TaskLock(Path(path))
    ok = lock.try_acquire()
    assert "portalocker" not in sys.modules
print("HELD" if ok else "BUSY", flush=True)
sys.stdin.read()
"""


def holder(how: str, path: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, how, str(path)], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()  # type: ignore[union-attr]


def release(proc: subprocess.Popen) -> None:
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.wait(30) == 0


@pytest.mark.parametrize(("first", "second"), [("portalocker", "mdcron"),
                                               ("mdcron", "portalocker"),
                                               ("mdcron", "mdcron")])
def test_each_excludes_the_other(tmp_path, first, second):
    path = tmp_path / "locks" / "job.lock"
    path.parent.mkdir()
    a, state = holder(first, path)
    assert state == "HELD"
    b, state = holder(second, path)
    assert state == "BUSY"  # the lock another process holds, whichever library took it
    release(b)
    release(a)
    c, state = holder(second, path)
    assert state == "HELD"  # and it is free again once the holder is gone
    release(c)


def test_portalocker_still_locks_with_flock():
    """The premise of the fcntl path: portalocker's POSIX lock is fcntl.flock with these flags
    (an upgrade that switches it to lockf must fail here, not silently split the lock)."""
    import fcntl

    import portalocker
    from portalocker import portalocker as impl

    assert impl.LOCKER is fcntl.flock
    assert portalocker.LockFlags.EXCLUSIVE == fcntl.LOCK_EX
    assert portalocker.LockFlags.NON_BLOCKING == fcntl.LOCK_NB
    assert portalocker.LockFlags.UNBLOCK == fcntl.LOCK_UN


def test_release_frees_the_lock_in_process(tmp_path):
    lock = locks.TaskLock(tmp_path / "l" / "x.lock")
    assert lock.try_acquire()
    assert not locks.TaskLock(lock.path).try_acquire()  # a second open file description
    lock.release()
    again = locks.TaskLock(lock.path)
    assert again.try_acquire()
    again.release()
