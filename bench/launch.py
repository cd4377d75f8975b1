"""Run one command as a fresh process and report its own peak memory: `launch.py FD ARGV...`.

Why a launcher: `ru_maxrss` of a child counts the memory of the process it was forked from (the
kernel carries the old address space's peak across exec, and `subprocess` forks with vfork, so the
child "had" the whole bench). This small interpreter (`python -S`, a few MiB) forks and execs the
command itself, so the child's peak starts from the launcher's, never the bench's. It times the
child from just before fork to `wait4` and writes `epoch wall_ms maxrss_kib exit_code` to FD.
SIGTERM to the launcher kills the child's process group (the bench's timeout)."""

import os
import signal
import sys
import time


def main() -> None:
    fd = int(sys.argv[1])
    argv = sys.argv[2:]
    epoch = time.time()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    signal.signal(signal.SIGTERM, lambda s, f: os.killpg(pid, signal.SIGKILL))
    while True:
        try:
            _, status, usage = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    t1 = time.perf_counter()
    code = os.waitstatus_to_exitcode(status)
    os.write(fd, f"{epoch!r} {(t1 - t0) * 1000.0!r} {usage.ru_maxrss} {code}".encode())


main()
