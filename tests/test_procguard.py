"""run/procguard.py: a tick is non-dumpable and a child subreaper by the time its first task
starts (prctl through _ctypes, issue 27), as seen by the kernel, not by our return values."""

import subprocess
import sys

from conftest import RUN_SCHEDULER, SCHEDULER

# at the due task's spawn, the kernel is asked (PR_GET_DUMPABLE, PR_GET_CHILD_SUBREAPER)
PROBE = """
import runpy, sys
seen = []
def hook(event, args):
    if event == "subprocess.Popen" and not seen:
        import ctypes
        libc = ctypes.CDLL(None)
        reaper = ctypes.c_int(-1)
        libc.prctl(37, ctypes.byref(reaper), 0, 0, 0)
        seen.append((libc.prctl(3, 0, 0, 0, 0), reaper.value))
sys.addaudithook(hook)
""" + RUN_SCHEDULER + """
print("AT THE SPAWN dumpable=%d subreaper=%d" % seen[0])
"""


def test_the_tick_is_undumpable_and_a_subreaper_when_its_task_starts(home, write_task):
    write_task("due", command="true")
    out = subprocess.run([sys.executable, "-c", PROBE, str(SCHEDULER), "--home", str(home),
                          "tick", "--now", "2026-11-23T10:00:00+00:00"],
                         capture_output=True, text=True, timeout=60)
    assert "AT THE SPAWN dumpable=0 subreaper=1" in out.stdout, out.stdout + out.stderr


def test_prctl_calls_report_success():
    out = subprocess.run([sys.executable, "-c", "from mdcron.run.procguard import *;"
                          "print(make_undumpable(), become_subreaper())"],
                         capture_output=True, text=True, timeout=60, cwd=SCHEDULER.parent)
    assert out.stdout.split() == ["True", "True"], out.stdout + out.stderr
