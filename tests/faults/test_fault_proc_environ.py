"""A task cannot read the scheduler's secrets through /proc: the tick (and `run`) mark
themselves non-dumpable, so `/proc/<tick pid>/environ` is closed to a task of the same user.

Root can read any process's environ whatever the flag, so when the tests run as root the tick
(and with it its tasks) runs as `nobody`; as any other user it runs as that user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from faultlib import BEFORE, NOW, SCHEDULER, render_task

NOBODY = 65534
SCAN = r"""for f in /proc/[0-9]*/environ /proc/[0-9]*/task/[0-9]*/environ; do
  if cat "$f" 2>/dev/null | tr '\0' '\n' | grep -q "=$SECRET_VALUE"; then echo "FOUND $f"; fi
done
echo "self $(cat /proc/self/environ | tr '\0' '\n' | grep -c '^MDCRON_TASK_ID=scan$')"
echo "shell $(cat /proc/$$/environ | tr '\0' '\n' | grep -c '^MDCRON_TASK_ID=scan$')"
echo "parent readable: $(cat /proc/$PPID/environ 2>/dev/null | tr '\0' '\n' | wc -l)"
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def _unprivileged() -> list[str]:
    """The prefix that starts the CLI as an unprivileged user ([] when we are one)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot start the tick as an unprivileged"
                    " user, and root reads every /proc/*/environ regardless")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


@pytest.fixture
def open_home():
    """A home the unprivileged user owns (pytest's tmp_path is root-only)."""
    home = Path(tempfile.mkdtemp(prefix="mdcron-proc-"))
    os.chmod(home, 0o755)
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("command", [["tick", "--now", NOW], ["run", "scan"], ["crontab"]])
def test_a_task_cannot_read_the_ticks_secrets_from_proc(open_home, command):
    home, secret = open_home, "s3cr3t-" + uuid.uuid4().hex
    (home / "tasks").mkdir()
    (home / "scheduler.yaml").write_text("secret_env: ['*_TOKEN']\n")
    scan = SCAN.replace("$SECRET_VALUE", secret)  # in command lines, never in an environ
    (home / "tasks" / "scan.md").write_text(
        render_task("scan", schedule="0 10 * * *", command=scan))
    if os.geteuid() == 0:
        for path in [home, *home.rglob("*")]:
            os.chown(path, NOBODY, NOBODY)
    env = {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": secret, "HOOK_TOKEN": secret}

    prefix = _unprivileged()

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, sys.executable, str(SCHEDULER), "--home", str(home),
                               *args], env=env, capture_output=True, text=True, timeout=60)

    if command[0] != "run":
        cli("tick", "--now", BEFORE)
    if command == ["crontab"]:  # as the README's crontab line starts it: cron's sh execs it
        line = (f"cd {home} && exec {sys.executable} {SCHEDULER} --home {home} tick --now {NOW}"
                " >> tick.log 2>&1")
        done = subprocess.run([*prefix, "/bin/sh", "-c", line], env=env, capture_output=True,
                              text=True, timeout=60)
        log = (home / "tick.log").read_text() if (home / "tick.log").exists() else ""
        if done.returncode == 126 and "Permission denied" in done.stderr + log:
            pytest.skip(f"the unprivileged user's shell cannot start {sys.executable} here")
    else:
        done = cli(*command)
    assert done.returncode == 0, done.stdout + done.stderr
    [log] = (home / "logs" / "runs" / "scan").rglob("*.log")
    said = log.read_text()
    # the scan works: a task reads its own environ (dumpable again after exec)
    assert "self 1" in said and "shell 1" in said, said
    assert "FOUND" not in said, said
    assert "parent readable: 0" in said
