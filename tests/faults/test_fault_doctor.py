"""`doctor` names what is wrong with a home and how to fix it; state and log files are private
to their owner whatever the umask."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from fake_anthropic import tool_use
from faultlib import BEFORE, NOW, SCHEDULER, doctor, run_cli


def fake_crontab(tmp_path: Path, listing: str) -> dict[str, str]:
    """A `crontab` command on PATH that lists `listing` (as `crontab -l` would)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "listing").write_text(listing)
    script = bin_dir / "crontab"
    script.write_text(f"#!/bin/sh\n[ \"$1\" = -l ] && exec cat {bin_dir / 'listing'}\nexit 1\n")
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def healthy(home: Path, tmp_path: Path, sink) -> dict[str, str]:
    (home / "scheduler.yaml").write_text(
        f"notify:\n  destinations:\n    ops: \"{sink.json_url()}\"\n")
    (home / "tasks" / "t.md").write_text(
        "---\nid: t\nschedule: '0 6 * * *'\ncommand: 'true'\nuser: root\n---\n")  # issue 21
    env = fake_crontab(tmp_path, f"MAILTO=me\n* * * * * cd {home} && {sys.executable}"
                       f" scheduler.py tick >> logs/tick.log 2>&1\n")
    env["ANTHROPIC_API_KEY"] = "sk-ant-doctor-check-123"
    (home / "logs").mkdir(mode=0o700, exist_ok=True)  # `>> logs/tick.log`: install makes it
    assert run_cli(home, "tick", env=env).returncode == 0  # the real clock: a recent tick
    return env


def checks(out: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {line.split(":", 1)[0][5:]: line[:4].strip() for line in out.stdout.splitlines()
            if line[:4].strip() in ("ok", "warn", "fail")}


def test_doctor_on_a_healthy_home_is_all_ok(home, tmp_path, http_sink):
    env = healthy(home, tmp_path, http_sink)
    out = doctor(home, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert set(checks(out).values()) == {"ok"}, out.stdout
    assert {"python", "permissions", "config", "destinations", "database", "crontab",
            "api key", "task files", "last tick"} <= set(checks(out))
    assert "sk-ant-doctor-check-123" not in out.stdout and str(http_sink.port) not in out.stdout
    as_json = json.loads(doctor(home, "--json", env=env).stdout)
    assert {c["status"] for c in as_json} == {"ok"}


BREAKAGES = {
    "permissions": "chmod -R go-rwx",
    "crontab": "crontab -e",
    "destinations": "apprise -vv",
    "config": "validate",
    "api key": "ANTHROPIC_API_KEY",
    "task files": "rename",
    "database": ".recover",
}


@pytest.mark.parametrize("broken", sorted(BREAKAGES))
def test_doctor_names_each_problem_and_its_fix(home, tmp_path, http_sink, broken):
    env = healthy(home, tmp_path, http_sink)
    if broken == "permissions":
        (home / "state").chmod(0o755)
    elif broken == "crontab":
        env = {**env, **fake_crontab(tmp_path, "# nothing here\n")}
    elif broken == "destinations":
        with open(home / "scheduler.yaml", "a") as f:
            f.write("    bad: \"nosuchscheme://x/y\"\n")
    elif broken == "config":
        (home / "scheduler.yaml").write_text("max_parallel: [\n")
    elif broken == "api key":
        del env["ANTHROPIC_API_KEY"]
        (home / "tasks" / "c.md").write_text(
            "---\nid: c\nschedule: '0 6 * * *'\nrun_as: claude\n---\nSay hi.\n")
    elif broken == "task files":
        shutil.copy(home / "tasks" / "t.md", home / "tasks" / "t2.md")
    elif broken == "database":
        with open(home / "state" / "mdcron.db", "r+b") as f:
            f.write(b"garbage!" * 64)
    out = doctor(home, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    found = checks(out)
    assert found[broken] == "fail", out.stdout
    failed = [name for name, status in found.items() if status == "fail"]
    assert failed == [broken] or broken == "config", out.stdout
    fix = out.stdout.split(f"fail {broken}:", 1)[1].splitlines()[1]
    assert fix.strip().startswith("fix:") and BREAKAGES[broken] in fix, out.stdout


def test_doctor_reads_only(home, tmp_path, http_sink):
    env = healthy(home, tmp_path, http_sink)
    def files() -> dict[Path, bytes]:
        return {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}

    before = files()
    doctor(home, env=env)
    after = files()
    assert {p: after[p] for p in before} == before  # nothing changed
    # nothing created but the companions SQLite itself makes for a read-only reader
    assert {p.name for p in set(after) - set(before)} <= {"mdcron.db-wal", "mdcron.db-shm"}
    bare = tmp_path / "bare"
    (bare / "tasks").mkdir(parents=True)
    out = doctor(bare, env=env)
    assert "does not exist yet" in out.stdout and not (bare / "state").exists()


def test_state_and_log_files_are_private_whatever_the_umask(home, write_task, http_sink,
                                                           fake_claude):
    shutil.copytree(REPO / "prompts", home / "prompts")
    (home / "scheduler.yaml").write_text(
        f"kill_grace: 0.2\nnotify:\n  destinations:\n    ops: \"{http_sink.json_url()}\"\n"
        "claude:\n  retry_backoff: 0.01\n")
    script = home / "job.sh"
    script.write_text("#!/bin/sh\nech hello\n")
    script.chmod(0o755)
    write_task("job", schedule="0 10 * * *", run_as="script", command="job.sh")
    write_task("ok", schedule="0 10 * * *", command="echo fine")
    write_task("slow", schedule="0 10 * * *", command="sleep 30", timeout=1, self_heal=False)
    fake_claude.tools(tool_use("replace_in_file", path="job.sh", old="ech hello",
                               new="echo hello"))
    fake_claude.tools(tool_use("finish", diagnosis="typo: ech"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
    env.update(fake_claude.environ)
    for now in (BEFORE, NOW):
        done = subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), "tick",
                               "--now", now], capture_output=True, text=True, env=env,
                              preexec_fn=lambda: os.umask(0o022), timeout=120)
        assert "Traceback" not in done.stderr, done.stderr
    assert (home / "logs" / "self-heal-audit.log").exists()  # the heal did write its logs
    assert any((home / "logs").rglob("heal-backups/*/*/*"))
    exposed = []
    for folder in (home / "state", home / "logs"):
        for path in [folder, *folder.rglob("*")]:
            mode = stat.S_IMODE(path.lstat().st_mode)
            if mode & 0o077:
                exposed.append(f"{path.relative_to(home)} {mode:o}")
    assert exposed == []
