"""Keep the scheduler's own secrets out of reach of the tasks it starts, through /proc.

Tasks get an environment without the scheduler's secrets (environment.py), but they run as the
same user, and Linux lets a process read `/proc/<pid>/environ` of any process of its user: a
task could read the tick's (its parent's) environment block, API key included, and so could a
long task started by an earlier tick read every later tick's.

`make_undumpable` marks the process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): the kernel then
gives its /proc entries to root and refuses the ptrace-style access that `environ`, `mem` and
`maps` need, to every process without CAP_SYS_PTRACE; it also means no core dump with the
secrets in it. A child starts dumpable again at `execve`, so a task can read its own
/proc/self as always. cli.main calls this first thing, for every command (they all start with
the same environment).

What it does not cover: the interpreter's start-up before the call (some tens of
milliseconds), root, processes of the user holding CAP_SYS_PTRACE, and a parent that still
holds the same environment (cron's `/bin/sh -c` running the crontab line when it does not
`exec` the tick). Removing the secrets from `os.environ` would not help here: the kernel shows
the original block, whatever the process does to its copy.
"""

from __future__ import annotations

import sys

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


_FOUND: list = []  # _prctl's answer, once found


def _prctl():  # -> the C library's prctl, called with C ints; None when it cannot be had
    if not _FOUND:
        _FOUND.append(_find_prctl())
    return _FOUND[0]


def _find_prctl():
    """prctl(2) through _ctypes, the C half of ctypes: what ctypes.CDLL(None).prctl is, without
    importing ctypes itself (issue 27: ~1.5-2 ms of every tick, struct and the whole ctypes
    package loaded for two calls). Falls back on ctypes where _ctypes lacks what this needs."""
    try:
        import _ctypes  # lazy: only on Linux, for the two calls below

        class Int(_ctypes._SimpleCData):  # ctypes.c_int
            _type_ = "i"

        class Prctl(_ctypes.CFuncPtr):  # a function of ctypes.CDLL(None, use_errno=True)
            _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
            _restype_ = Int

        class Libc:  # what CFuncPtr((name, library)) reads of a CDLL: its handle
            _handle = _ctypes.dlopen(None, 0)

        return Prctl(("prctl", Libc))
    except (ImportError, AttributeError, TypeError, OSError):
        pass
    try:
        import ctypes  # lazy: a Python whose _ctypes differs (not CPython 3.11+)

        return ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None


def make_undumpable() -> bool:
    """True when this process is now non-dumpable (Linux only; False elsewhere or on error)."""
    if not sys.platform.startswith("linux"):
        return False
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def become_subreaper() -> bool:
    """Orphaned descendants come back to this process (to be found and reaped) instead of to
    PID 1: what the tick and the daemon are for the tasks they start (issue 21). True when set
    (Linux only; False elsewhere or on error)."""
    if not sys.platform.startswith("linux"):
        return False
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
