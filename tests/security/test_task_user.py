"""Issue 21: a task with `user:` runs as that user, and from there it cannot read the
scheduler's secrets: not the ticks' environments in /proc, not the home's private files.

Real accounts: each test that needs them adds throwaway users and groups with `useradd` /
`groupadd` and removes them afterwards, so these tests run as root only (skipped otherwise).
The other user cannot run anything under /root (mode 0700, where the interpreter lives here),
so its tasks are /bin/sh commands, in homes made under /tmp with mode 0755.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import SCHEDULER, render_task, run_cli

from mdcron.web.security import load_token  # the dashboard's own token file

NOW = "2026-11-23T10:00:00+00:00"
BEFORE = "2026-11-23T09:59:00+00:00"  # a first tick here makes 10:00 slots due at NOW

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux accounts")
as_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None,
                             reason="needs root and useradd: the tests add throwaway users")


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


class Accounts:
    """Throwaway users and groups, removed at the end of the test."""

    def __init__(self) -> None:
        self.users: list[str] = []
        self.groups: list[str] = []

    def group(self) -> grp.struct_group:
        name = "mdcg" + uuid.uuid4().hex[:8]
        _run("groupadd", name)
        self.groups.append(name)
        return grp.getgrnam(name)

    def user(self, *, groups: tuple[str, ...] = ()) -> pwd.struct_passwd:
        name = "mdcu" + uuid.uuid4().hex[:8]
        extra = ["--groups", ",".join(groups)] if groups else []
        _run("useradd", "--no-create-home", "--home-dir", f"/home/{name}", "--shell",
             "/usr/sbin/nologin", "--user-group", *extra, name)
        self.users.append(name)
        return pwd.getpwnam(name)

    def remove(self) -> None:
        for name in self.users:
            if subprocess.run(["userdel", name], capture_output=True).returncode != 0:
                subprocess.run(["userdel", "--force", name], capture_output=True)
        for name in self.groups:
            subprocess.run(["groupdel", name], capture_output=True)


@pytest.fixture
def accounts():
    made = Accounts()
    yield made
    made.remove()


@pytest.fixture
def open_home():
    """A home other users may enter (pytest's tmp_path is under a root-only folder)."""
    home = Path(tempfile.mkdtemp(prefix="mdcron-user-"))
    os.chmod(home, 0o755)
    (home / "tasks").mkdir(mode=0o755)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def write(home: Path, task_id: str, **fields: object) -> Path:
    fields.setdefault("schedule", "0 10 * * *")
    path = home / "tasks" / f"{task_id}.md"
    path.write_text(render_task(task_id, **fields), encoding="utf-8")
    return path


def run_log(home: Path, task_id: str) -> str:
    [log] = (home / "logs" / "runs" / task_id).rglob("*.log")
    return log.read_text()


def runs(home: Path) -> dict[str, dict]:
    out = run_cli(home, "history", "--json")
    return {r["task_id"]: r for r in json.loads(out.stdout)}


# --- the hostile task ---------------------------------------------------------------------------

SCAN = r"""S1='{a1}''{b1}'; S2='{a2}''{b2}'; S3='{a3}''{b3}'; S4='{a4}''{b4}'
home='{home}'; out='{out}'
found() {{ grep -alF -e "$S1" -e "$S2" -e "$S3" -e "$S4" "$@" 2>/dev/null | sed 's/^/FOUND /'; }}
touch "$out/ready"; rounds=0; end=$(( $(date +%s) + 120 ))
while [ ! -e "$out/stop" ] && [ "$(date +%s)" -lt "$end" ]; do
  found /proc/[0-9]*/environ /proc/[0-9]*/task/[0-9]*/environ
  found -r "$home" /etc/crontab /var/spool/cron
  rounds=$((rounds + 1))
done
for f in scheduler.yaml state/web-token logs/tick.log state/mdcron.db; do
  cat "$home/$f" >/dev/null 2>&1 && echo "READ $f" || echo "denied $f"
done
grep -c '^MDCRON_TASK_ID=scan$' /proc/self/environ | sed 's/^/self /'
echo "rounds $rounds"
"""


def _halves(secret: str) -> dict[str, str]:
    """A secret as two halves, so the task file (which the scan also reads) never holds it."""
    return {"a": secret[: len(secret) // 2], "b": secret[len(secret) // 2 :]}


def _cron_tick(home: Path, now: str, env: dict[str, str]) -> subprocess.Popen:
    """A tick as the README's crontab line starts it: cron's sh execs it, output to tick.log."""
    line = (f"cd {home} && exec {sys.executable} {SCHEDULER} --home {home} tick --now {now}"
            " >> logs/tick.log 2>&1")
    return subprocess.Popen(["/bin/sh", "-c", line], env=env)


def _wait_for(path: Path, seconds: float, proc: subprocess.Popen) -> None:
    give_up = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, "the tick ended before the scan started"
        assert time.monotonic() < give_up, f"{path} never appeared"
        time.sleep(0.02)


@as_root
def test_a_task_of_another_user_finds_no_secret_while_ticks_start(accounts, open_home,
                                                                   http_sink):
    home, user = open_home, accounts.user()
    out = Path(tempfile.mkdtemp(prefix="mdcron-scan-"))  # the scan's own folder (ready, stop)
    os.chown(out, user.pw_uid, user.pw_gid)
    try:
        api_key, hook = "sk-ant-" + uuid.uuid4().hex, "hook-" + uuid.uuid4().hex
        literal = "bearer-" + uuid.uuid4().hex  # written into scheduler.yaml itself
        config = home / "scheduler.yaml"
        config.write_text(
            f"notify:\n  destinations:\n    ops: \"{http_sink.json_url('/h/${HOOK_TOKEN}')}\"\n"
            f"incident_command: \"curl -H 'Authorization: {literal}' https://example.invalid\"\n")
        config.chmod(0o600)  # as the README says: it may hold tokens
        web_token = load_token(home / "state" / "web-token")
        (home / "logs").mkdir(mode=0o700)  # as `install --cron` leaves it
        os.close(os.open(home / "logs" / "tick.log", os.O_CREAT | os.O_WRONLY, 0o600))
        secrets = [api_key, hook, literal, web_token]
        parts = {}
        for n, secret in enumerate(secrets, 1):
            parts.update({f"{k}{n}": v for k, v in _halves(secret).items()})
        write(home, "scan", user=user.pw_name, timeout="2h",  # stale only after 2h of --now
              command=SCAN.format(home=home, out=out, **parts))
        write(home, "victim", schedule="* * * * *", user=user.pw_name, command="true")
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "ANTHROPIC_API_KEY": api_key,
               "HOOK_TOKEN": hook}
        assert _cron_tick(home, BEFORE, env).wait(timeout=60) == 0

        scanning = _cron_tick(home, NOW, env)  # runs the scan (and a victim) as the user
        _wait_for(out / "ready", 60, scanning)
        started, ticks, minute = time.monotonic(), 0, datetime.fromisoformat(NOW)
        while (time.monotonic() - started < 10 or ticks < 4) and ticks < 60:  # ~10 s of ticks
            minute += timedelta(minutes=1)
            assert _cron_tick(home, minute.isoformat(), env).wait(timeout=60) == 0
            ticks += 1
        (out / "stop").touch()
        assert scanning.wait(timeout=120) == 0
        said = run_log(home, "scan")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    assert "FOUND" not in said, said
    assert "READ" not in said and said.count("denied") == 4, said
    assert "self 1" in said, said  # the scan worked: it reads its own environment
    rounds = int(said.split("rounds ")[1].split()[0])
    assert rounds >= 3, said
    history = run_cli(home, "history", "--json", "-n", "100").stdout
    assert history.count('"victim"') >= ticks, history  # the ticks really started tasks
    assert api_key not in history


# --- what the task sees ----------------------------------------------------------------------

SHOW = ('echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"; '
        'echo "HOME=$HOME USER=$USER LOGNAME=$LOGNAME"; pwd')


def _seen(log: str) -> dict[str, str]:
    values = {}
    for line in log.splitlines():
        for word in line.split(" "):
            key, _, value = word.partition("=")
            if value:
                values[key] = value
        if line.startswith("uid="):  # groups= is a space-separated list
            values["groups"] = line.split("groups=", 1)[1]
    return values


@as_root
def test_the_task_runs_as_its_user_with_its_groups_and_home(accounts, open_home):
    home = open_home
    extra, other = accounts.group(), accounts.group()
    user = accounts.user(groups=(extra.gr_name,))
    fallback = accounts.user()
    (home / "scheduler.yaml").write_text(f"run_user: {fallback.pw_name}\n")
    write(home, "plain", user=user.pw_name, command=SHOW)
    write(home, "grouped", user=str(user.pw_uid), group=other.gr_name, command=SHOW)
    write(home, "default", command=SHOW)  # the config's run_user
    write(home, "private", user=user.pw_name, cwd="closed", command="true")
    (home / "closed").mkdir(mode=0o700)
    write(home, "deep", user=user.pw_name, cwd="shut/inner", command="true")
    (home / "shut" / "inner").mkdir(parents=True)
    (home / "shut").chmod(0o700)
    run_cli(home, "tick", "--now", BEFORE)
    done = run_cli(home, "tick", "--now", NOW)

    plain = _seen(run_log(home, "plain"))
    assert plain["uid"] == str(user.pw_uid) and plain["gid"] == str(user.pw_gid)
    assert set(plain["groups"].split()) == {str(user.pw_gid), str(extra.gr_gid)}
    assert plain["HOME"] == user.pw_dir and plain["USER"] == plain["LOGNAME"] == user.pw_name
    grouped = _seen(run_log(home, "grouped"))
    assert grouped["uid"] == str(user.pw_uid) and grouped["gid"] == str(other.gr_gid)
    assert str(extra.gr_gid) in grouped["groups"].split()  # still the user's own groups
    default = _seen(run_log(home, "default"))
    assert default["uid"] == str(fallback.pw_uid) and default["USER"] == fallback.pw_name
    log = next((home / "logs" / "runs" / "plain").rglob("*.log"))
    assert log.stat().st_uid == 0 and log.stat().st_mode & 0o077 == 0  # written by the tick

    reason = runs(home)["private"]["error"]
    assert runs(home)["private"]["status"] == "failed", done.stdout + done.stderr
    assert f"user {user.pw_name} cannot read and enter the working folder {home / 'closed'}" \
        in reason and "mode 0700" in reason, reason
    reason = runs(home)["deep"]["error"]
    assert reason == (
        f"cannot start: user {user.pw_name} cannot reach the working folder"
        f" {home / 'shut' / 'inner'}: {home / 'shut'} is closed to it (mode 0700, owner root);"
        f" give it search permission (e.g. chmod o+x {home / 'shut'}), or use a folder it can"
        " reach"), reason


# --- a tick that is not root --------------------------------------------------------------------


def _not_root_prefix() -> list[str]:
    """Runs the CLI as a user that is not root. The unprivileged user of this machine cannot
    start the interpreter under /root, so a user namespace stands in: inside it the tick's
    euid is 65534 (nobody) and it holds no privilege over the host's ids."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare: cannot start the tick as a user that is not root")
    probe = subprocess.run([unshare, "--user", sys.executable, "-c",
                            "import os; print(os.geteuid())"], capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() == "0":
        pytest.skip(f"user namespaces are not available here: {probe.stderr.strip()}")
    return [unshare, "--user"]


@as_root
def test_a_tick_that_is_not_root_refuses_another_user_and_runs_its_own(accounts, open_home):
    home, user = open_home, accounts.user()
    prefix = _not_root_prefix()
    nobody = pwd.getpwuid(65534).pw_name
    write(home, "other", user=user.pw_name, command="echo ran")
    write(home, "own", user=nobody, command='echo "ran as $(id -u) $USER"')
    other_group = accounts.group()
    write(home, "regroup", user=nobody, group=other_group.gr_name, command="true")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}

    def tick(now: str) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, sys.executable, str(SCHEDULER), "--home", str(home),
                               "tick", "--now", now], capture_output=True, text=True,
                              env=env, timeout=60)

    tick(BEFORE)
    done = tick(NOW)
    assert "Traceback" not in done.stderr + done.stdout
    found = runs(home)
    assert found["other"]["status"] == "failed", done.stdout + done.stderr
    assert found["other"]["error"] == (
        f"cannot switch to user {user.pw_name}: the tick runs as uid 65534 (not root); run the"
        " tick as root or remove user:")
    assert found["regroup"]["error"] == (
        f"cannot switch to group {other_group.gr_name} (gid {other_group.gr_gid}): the tick runs"
        " as uid 65534 (not root); run the tick as root or remove group:")
    assert found["own"]["status"] == "success"
    assert f"ran as 65534 {nobody}" in run_log(home, "own")


# --- bad names ----------------------------------------------------------------------------------


def test_an_unknown_user_is_a_file_and_line_error_and_other_tasks_run(home, write_task, cli):
    missing = "mdcnouser" + uuid.uuid4().hex[:6]
    bad = write_task("bad", schedule="0 10 * * *", user=missing, command="echo bad")
    write_task("good", schedule="0 10 * * *", command="echo good")
    checked = cli("validate")
    assert checked.returncode == 1
    assert (f"{bad}:4: error: user: no user {missing} on this host; create it (useradd"
            f" {missing})") in checked.stderr, checked.stderr
    cli("tick", "--now", BEFORE)
    cli("tick", "--now", NOW)
    found = runs(home)
    assert found["good"]["status"] == "success" and "bad" not in found


def test_user_and_group_on_a_claude_task_are_errors(home, write_task, cli):
    write_task("ask", schedule="0 10 * * *", run_as="claude", user="root", group="root",
               prompt="hello")
    out = cli("validate").stderr
    assert "user: a Claude prompt task runs inside the tick, as the tick's user" in out, out
    assert "group: a Claude prompt task runs inside the tick" in out, out


@as_root
def test_a_user_created_after_the_file_was_read_is_picked_up(accounts, open_home):
    home, name = open_home, "mdcu" + uuid.uuid4().hex[:8]
    write(home, "later", user=name, command="id -un")
    first = run_cli(home, "tick", "--now", BEFORE)
    assert "no user" in first.stdout + first.stderr  # cached as invalid
    _run("useradd", "--no-create-home", "--user-group", name)
    accounts.users.append(name)
    run_cli(home, "tick", "--now", NOW)
    assert run_log(home, "later").strip() == name


@as_root
def test_doctor_warns_about_tasks_that_run_as_root(accounts, open_home):
    home, user = open_home, accounts.user()
    write(home, "backup", command="true")
    write(home, "chosen", user="root", command="true")  # an explicit choice: not listed
    said = run_cli(home, "doctor").stdout
    assert "warn task users: 1 task(s) run as root (backup)" in said, said
    config = home / "scheduler.yaml"
    config.write_text(f"run_user: {user.pw_name}\n")
    config.chmod(0o644)
    said = run_cli(home, "doctor").stdout
    assert f"warn task users: {config} is readable by other users" in said, said
    config.chmod(0o600)
    assert "ok   task users" in run_cli(home, "doctor").stdout


# --- the lock the task inherits ---------------------------------------------------------------

FORGE = r"""#!/bin/bash
for f in /proc/self/fd/*; do
  n=${f##*/}
  [ "$n" -gt 2 ] || continue
  case "$(readlink "$f")" in *.lock) ;; *) continue ;; esac
  if (printf '{"pgid": 1}' >&"$n") 2>/dev/null; then echo "WROTE $n $(readlink "$f")"
  else echo "denied $n"; fi
done
echo checked
"""


@as_root
def test_a_task_of_another_user_cannot_rewrite_its_lock(accounts, open_home):
    """The task inherits its lock (and resource units) so that the lock outlives a killed
    tick. Whoever can write the lock file's record (pgid, tick pid, deadline) can make the next
    root tick kill any process group as "stale": the task gets a read-only descriptor."""
    home, user = open_home, accounts.user()
    (home / "scheduler.yaml").write_text("resources: {gpu: 1}\n")
    script = home / "forge.sh"  # bash: dash cannot name a descriptor above 9
    script.write_text(FORGE)
    script.chmod(0o755)
    write(home, "forge", user=user.pw_name, uses=["gpu"], run_as="script", command="./forge.sh")
    run_cli(home, "tick", "--now", BEFORE)
    run_cli(home, "tick", "--now", NOW)
    said = run_log(home, "forge")
    assert "checked" in said and "WROTE" not in said, said
    assert said.count("denied") >= 2, said  # the task lock and the unit, both read-only
    assert runs(home)["forge"]["status"] == "success"
