"""runner.py with real processes, real signals, real pipes and real file locks."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mdcron.core.outcome import Outcome
from mdcron.run.process import (
    CommandSpec,
    RunnerError,
    command_argv,
    kill_process_group,
    run_command,
)
from mdcron.tasks.task import Task

REPO = Path(__file__).resolve().parents[1]


def sh(command: str) -> list[str]:
    return ["/bin/sh", "-c", command]


def run(tmp_path: Path, argv: list[str], *, timeout: float = 10.0, max_log: int = 1 << 20,
        tail: int = 4096, grace: float = 0.3, cwd: Path | None = None, **kwargs):
    spec = CommandSpec(argv=argv, cwd=cwd or tmp_path, env=dict(os.environ), timeout=timeout)
    return run_command(spec, log_path=tmp_path / "logs" / "run.log", max_log_bytes=max_log,
                       tail_bytes=tail, kill_grace=grace, **kwargs)


def live_members(pgid: int) -> list[int]:
    """Non-zombie processes of the group, read from /proc by the test itself."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()
            if int(fields[2]) == pgid and fields[0] != b"Z":
                pids.append(int(name))
    return pids


def assert_group_gone(pgid: int) -> None:
    """os.killpg(pgid, 0) raises once the group is reaped; where PID 1 does not reap orphans
    (this VM, containers without --init) zombies linger, so then no member may be alive."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return
    assert live_members(pgid) == []


def make_task(tmp_path: Path, command: str, run_as: str = "script") -> Task:
    return Task(id="t", path=tmp_path / "t.md", schedule="@daily", title="t", run_as=run_as,
                command=command)


# --- outcomes ----------------------------------------------------------------------------------


def test_success_captures_output_into_a_private_log(tmp_path):
    result = run(tmp_path, sh("echo hello; echo oops >&2"))
    assert result.outcome is Outcome.SUCCESS and result.ok
    assert result.exit_code == 0 and result.fail_reason is None
    assert result.output_tail == "hello\noops\n"
    assert result.log_path == tmp_path / "logs" / "run.log"
    assert result.log_path.read_text() == "hello\noops\n"
    assert result.log_path.stat().st_mode & 0o777 == 0o600
    assert result.log_path.parent.stat().st_mode & 0o777 == 0o700
    assert not result.log_truncated
    assert 0 < result.duration < 5


def test_exit_code_is_a_failure(tmp_path):
    result = run(tmp_path, sh("echo bad; exit 3"))
    assert (result.outcome, result.exit_code, result.fail_reason) == (Outcome.FAILED, 3, "exit 3")
    assert result.output_tail == "bad\n"


def test_killed_by_signal(tmp_path):
    result = run(tmp_path, sh("kill -KILL $$"))
    assert result.outcome is Outcome.FAILED
    assert result.fail_reason == "killed by SIGKILL"
    assert result.exit_code == -signal.SIGKILL


def test_on_start_gets_the_pid_which_leads_its_own_group_and_session(tmp_path):
    pids = []
    code = "import os; print(os.getpid(), os.getpgid(0), os.getsid(0))"
    result = run(tmp_path, [sys.executable, "-c", code], on_start=pids.append)
    assert result.ok
    assert result.output_tail.split() == [str(pids[0])] * 3


@pytest.mark.parametrize(
    ("script", "outcome", "reason"),
    [
        ("""echo hi; echo '{"status": "error", "error": "quota exceeded"}'""",
         Outcome.FAILED, "quota exceeded"),
        ("""echo '{"status": "error", "message": "no network"}'; echo; echo '  '""",
         Outcome.FAILED, "no network"),
        ("""printf '{"status": "error", "code": 7}'""",
         Outcome.FAILED, '{"status": "error", "code": 7}'),
        ("""echo '{"status": "error", "error": {"code": 7}, "message": "m"}'""",
         Outcome.FAILED, "m"),
        ("""echo '{"status": "ok", "error": "none"}'""", Outcome.SUCCESS, None),
        ("""echo '{"status": "error", "error": "e"}'; echo done""", Outcome.SUCCESS, None),
        ("""echo '{"status": "error", "error": "on stderr"}' >&2""", Outcome.SUCCESS, None),
        ("""echo '["status", "error"]'""", Outcome.SUCCESS, None),
        ("""echo '{"status": "error", "error": "e"}'; exit 2""", Outcome.FAILED, "exit 2"),
    ],
)
def test_json_error_envelope_on_the_last_stdout_line(tmp_path, script, outcome, reason):
    result = run(tmp_path, sh(script))
    assert (result.outcome, result.fail_reason) == (outcome, reason)


def test_envelope_split_across_reads_still_counts(tmp_path):
    code = (
        "import sys, time\n"
        "sys.stdout.write('{\"status\": '); sys.stdout.flush(); time.sleep(0.05)\n"
        "sys.stdout.write('\"error\", \"error\": \"late\"}\\n')\n"
    )
    result = run(tmp_path, [sys.executable, "-c", code])
    assert (result.outcome, result.fail_reason) == (Outcome.FAILED, "late")


def test_a_last_line_over_64k_is_not_read_as_an_envelope(tmp_path):
    code = "print('{\"status\": \"error\", \"error\": \"' + 'x' * 100000 + '\"}')"
    result = run(tmp_path, [sys.executable, "-c", code])
    assert result.outcome is Outcome.SUCCESS


# --- starting ----------------------------------------------------------------------------------


def test_command_argv_shell_and_script(tmp_path):
    assert command_argv(make_task(tmp_path, "echo $HOME | wc", "shell"), tmp_path) == sh(
        "echo $HOME | wc"
    )
    script = tmp_path / "bin" / "job.sh"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\nfor a in "$0" "$@"; do echo "[$a]"; done\n')
    script.chmod(0o755)
    argv = command_argv(make_task(tmp_path, "bin/job.sh --flag 'a b' $HOME"), tmp_path)
    assert argv == [str(script), "--flag", "a b", "$HOME"]
    result = run(tmp_path, argv, cwd=tmp_path)
    assert result.output_tail == f"[{script}]\n[--flag]\n[a b]\n[$HOME]\n"
    assert command_argv(make_task(tmp_path, f"{script} x"), Path("/"))[0] == str(script)


def test_command_argv_refuses_missing_and_non_executable_scripts(tmp_path):
    with pytest.raises(RunnerError, match=r"script 'nope\.sh' not found in .*\(command: nope"):
        command_argv(make_task(tmp_path, "nope.sh --x"), tmp_path)
    (tmp_path / "x.sh").write_text("#!/bin/sh\n")
    with pytest.raises(RunnerError, match=r"script 'x\.sh' is not executable: chmod \+x x\.sh"):
        command_argv(make_task(tmp_path, "x.sh"), tmp_path)
    with pytest.raises(RunnerError, match="claude"):
        command_argv(make_task(tmp_path, "say hi", "claude"), tmp_path)
    with pytest.raises(RunnerError, match="no command"):
        command_argv(make_task(tmp_path, "  ", "shell"), tmp_path)


def test_start_failures_are_results_not_exceptions(tmp_path):
    missing_cwd = run(tmp_path, sh("true"), cwd=tmp_path / "gone")
    assert missing_cwd.outcome is Outcome.FAILED
    assert missing_cwd.fail_reason == f"cannot start: working directory {tmp_path / 'gone'} " \
        "does not exist"
    assert missing_cwd.exit_code is None
    assert "working directory" in missing_cwd.log_path.read_text()

    missing_program = run(tmp_path, [str(tmp_path / "nope")])
    assert missing_program.outcome is Outcome.FAILED
    assert "no such file or directory" in missing_program.fail_reason

    not_executable = tmp_path / "plain.sh"
    not_executable.write_text("echo hi\n")
    denied = run(tmp_path, [str(not_executable)])
    assert denied.outcome is Outcome.FAILED
    assert "permission denied" in denied.fail_reason and "chmod +x" in denied.fail_reason


# --- output ------------------------------------------------------------------------------------


def test_stdout_and_stderr_are_logged_in_arrival_order(tmp_path):
    log = tmp_path / "logs" / "run.log"
    # Each write waits until the previous one is in the log, so the order is the arrival order.
    code = (
        "import os, sys\n"
        "size = 0\n"
        "for i in range(5):\n"
        "    for stream, tag in ((sys.stdout, 'out'), (sys.stderr, 'err')):\n"
        "        line = f'{tag}{i}\\n'\n"
        "        stream.write(line); stream.flush(); size += len(line)\n"
        f"        while os.path.getsize({str(log)!r}) < size: pass\n"
    )
    result = run(tmp_path, [sys.executable, "-c", code])
    assert result.ok
    expected = "".join(f"out{i}\nerr{i}\n" for i in range(5))
    assert log.read_text() == expected
    assert result.output_tail == expected


def test_tail_is_bounded_and_starts_on_a_character(tmp_path):
    code = "print('é' * 60000); print('x' * 50000); print('END')"
    result = run(tmp_path, [sys.executable, "-c", code], tail=1001)
    assert len(result.output_tail.encode()) <= 1001
    assert result.output_tail.endswith("x\nEND\n")
    code = "print('é' * 60000, end='')"
    result = run(tmp_path, [sys.executable, "-c", code], tail=1001)
    assert result.output_tail == "é" * 500  # the split character at the cut is dropped


def test_log_cap_keeps_draining_and_says_how_much_was_dropped(tmp_path):
    total, cap = 50_000_000, 1_000_000
    result = run(tmp_path, sh(f"yes | head -c {total}"), max_log=cap, tail=4096)
    assert result.outcome is Outcome.SUCCESS
    assert result.log_truncated
    data = result.log_path.read_bytes()
    line = (f"[mdcron] output truncated: {total - cap} bytes not logged "
            f"(log_max_bytes={cap})\n").encode()
    assert data.endswith(line)
    assert len(data) <= cap + 1 + len(line)
    assert data[:cap] == b"y\n" * (cap // 2)
    assert len(result.output_tail.encode()) <= 4096
    assert result.output_tail.endswith("y\ny\n")


def test_memory_stays_bounded_for_a_gigabyte_of_output(tmp_path):
    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from mdcron.run.process import CommandSpec, run_command\n"
        "tmp = Path(sys.argv[1]); n = int(sys.argv[2])\n"
        "spec = CommandSpec(['/bin/sh', '-c', f'head -c {n} /dev/zero'], tmp, {}, 60)\n"
        "r = run_command(spec, log_path=tmp / 'big.log', max_log_bytes=1 << 20,"
        " tail_bytes=4096)\n"
        "print(r.outcome, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def peak_kib(n: int) -> int:
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path), str(n)], env=env,
                             capture_output=True, text=True, timeout=120, check=True).stdout
        outcome, rss = out.split()
        assert outcome == "success"
        return int(rss)

    assert peak_kib(1 << 30) - peak_kib(1) < 16 * 1024


def test_log_write_failure_still_returns_a_result(tmp_path):
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from mdcron.run.process import CommandSpec, run_command\n"
        "tmp = Path(sys.argv[1])\n"
        "cmd = \"head -c 200000 /dev/zero | tr '\\\\0' x; echo; echo done\"\n"
        "spec = CommandSpec(['/bin/sh', '-c', cmd], tmp, {'PATH': '/usr/bin:/bin'}, 30)\n"
        "r = run_command(spec, log_path=tmp / 'run.log', max_log_bytes=1 << 20,"
        " tail_bytes=4096, kill_grace=0.3)\n"
        "print(json.dumps([r.outcome, r.output_tail, r.log_truncated, str(r.log_path)]))\n"
    )

    def limit_file_size() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)],
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=60, preexec_fn=limit_file_size)
    assert proc.returncode == 0, proc.stderr
    outcome, tail, truncated, log_path = json.loads(proc.stdout)
    assert outcome == "success" and truncated
    assert log_path == str(tmp_path / "run.log")
    assert "x\ndone\n" in tail
    assert tail.endswith("\n[log write failed: [Errno 27] File too large]\n")
    assert len(tail.encode()) <= 4096
    assert (tmp_path / "run.log").stat().st_size <= 50_000


def test_unusable_log_folder_still_runs_the_command(tmp_path):
    (tmp_path / "logs").write_text("a file where the folder should be")
    result = run(tmp_path, sh("echo ran"))
    assert result.outcome is Outcome.SUCCESS
    assert result.log_path is None
    assert result.output_tail.startswith("ran\n")
    assert "[log write failed:" in result.output_tail


# --- timeouts and process groups ---------------------------------------------------------------


def test_timeout_kills_a_grandchild_that_ignores_term_and_outlives_its_parent(tmp_path):
    pids = []
    # The subshell ignores TERM and outlives the leader, which dies of the group's TERM.
    command = "(trap '' TERM; exec sleep 60) & echo $!; wait"
    result = run(tmp_path, sh(command), timeout=0.5, grace=0.3, on_start=pids.append)
    assert result.outcome is Outcome.TIMEOUT
    assert result.fail_reason == "timeout after 0.5s"
    assert result.exit_code == -signal.SIGTERM
    assert result.duration < 30  # not the grandchild's 60 s (0.8 s by design; a loaded machine)
    assert_group_gone(pids[0])
    grandchild = int(result.output_tail.split()[0])
    assert grandchild not in live_members(pids[0])


def test_timeout_when_the_leader_ignores_term(tmp_path):
    pids = []
    result = run(tmp_path, sh("trap '' TERM; sleep 60; sleep 60"), timeout=0.5, grace=0.2,
                 on_start=pids.append)
    assert result.outcome is Outcome.TIMEOUT
    assert result.exit_code == -signal.SIGKILL
    assert result.duration < 30  # not the leader's 120 s (0.7 s by design; a loaded machine)
    assert_group_gone(pids[0])


def test_timeout_ends_a_stopped_process(tmp_path):
    result = run(tmp_path, sh("kill -STOP $$"), timeout=0.3, grace=60.0)
    assert result.outcome is Outcome.TIMEOUT
    assert result.exit_code == -signal.SIGTERM  # TERM acted on at once: SIGCONT followed it
    assert result.duration < 30  # not KILL after the 60 s grace


def test_a_failing_on_start_kills_the_group_and_propagates(tmp_path):
    pids = []

    def on_start(pid: int) -> None:
        pids.append(pid)
        raise RuntimeError("could not record the pid")

    with pytest.raises(RuntimeError, match="record the pid"):
        run(tmp_path, sh("sleep 60"), on_start=on_start)
    assert_group_gone(pids[0])


@pytest.mark.parametrize(
    "background",
    [
        "sleep 60 &",  # holds stdout and stderr open
        "(trap '' TERM; exec sleep 60) &",  # ...and ignores TERM: killed after the grace
        "sleep 60 >/dev/null 2>&1 &",  # pipes close at once; the group still gets cleaned up
    ],
)
def test_processes_left_by_a_finished_leader_are_ended(tmp_path, background):
    pids = []
    result = run(tmp_path, sh(f"{background} echo left"), grace=60.0, on_start=pids.append)
    assert result.outcome is Outcome.SUCCESS
    assert result.output_tail == "left\n"
    assert result.duration < 30  # CLEANUP_GRACE (1 s), not the task's 60 s kill grace
    assert_group_gone(pids[0])
    assert "left running in the task's group" in result.log_path.read_text()


def test_draining_after_the_leader_exits_is_bounded_even_outside_the_group(tmp_path):
    # setsid leaves the group: it cannot be killed with it, but it cannot stall the run either.
    # The leader exits only once the escapee is out of the group (it says so through a fifo).
    fifo = tmp_path / "escaped"
    os.mkfifo(fifo)
    result = run(tmp_path, sh(f"setsid sh -c 'echo $$ > {fifo}; exec sleep 60' &"
                              f" read pid < {fifo}; echo $pid"))
    escaped = int(result.output_tail.split()[0])
    try:
        assert result.outcome is Outcome.SUCCESS
        assert 2 <= result.duration < 30  # DRAIN_LIMIT (2 s), not the escapee's 60 s
    finally:
        os.kill(escaped, signal.SIGKILL)


def test_kill_process_group_is_safe_when_the_group_is_gone(tmp_path):
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    assert kill_process_group(proc.pid, 0.2) is True


def test_kill_process_group_ends_a_group_not_our_child(tmp_path):
    # The leader is reaped right away (it only forks), as for a stale holder of a task lock.
    proc = subprocess.run(sh("(trap '' TERM; exec sleep 60) >/dev/null 2>&1 & echo $!"),
                          capture_output=True, text=True, start_new_session=True, check=True)
    pid = int(proc.stdout)
    pgid = os.getpgid(pid)
    assert live_members(pgid) == [pid]
    assert kill_process_group(pgid, 0.2) is True
    assert_group_gone(pgid)


# --- inherited lock ----------------------------------------------------------------------------


def test_a_passed_flock_fd_is_held_by_the_child_until_it_ends(tmp_path):
    lock_path = tmp_path / "task.lock"
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    started = threading.Event()
    results = []

    def target() -> None:
        results.append(run(tmp_path, sh(f"read word < {fifo}; echo got $word"),
                           pass_fds=[fd], on_start=lambda pid: started.set()))

    thread = threading.Thread(target=target)
    thread.start()
    probe = os.open(lock_path, os.O_RDWR)
    release = os.open(fifo, os.O_RDWR)  # never blocks; keeps the fifo open until the end
    try:
        assert started.wait(10)
        os.close(fd)  # our copy is gone: only the child's inherited copy holds the lock now
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(release, b"go\n")
        thread.join(10)
        assert not thread.is_alive()
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once the child has ended
    finally:
        os.close(release)
        os.close(probe)
    assert results[0].output_tail == "got go\n"
