"""`install` / `uninstall`: the crontab through the real `crontab` command (its spool isolated
in a private mount namespace), systemd units checked by `systemd-analyze verify`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SCHEDULER
from crontab_spool import OTHER, _env

from mdcron.cli import crontab_line
from mdcron.cli.install import MARKER, InstallError, add_cron_line, remove_cron_line

# --------------------------------------------------------------------- pure edits


def test_add_is_idempotent_keeps_other_lines_and_remove_undoes_it():
    line = crontab_line.render("/h", "/usr/bin/python3", "/c/scheduler.py")
    text, what = add_cron_line(OTHER, "/h", line)
    assert text == OTHER + MARKER.format(home="/h") + "\n" + line + "\n" and "added" in what
    assert add_cron_line(text, "/h", line) == (None, "already installed; nothing changed")
    newer = crontab_line.render("/h", "/opt/py/bin/python3", "/c/scheduler.py")
    updated, what = add_cron_line(text, "/h", newer)
    assert updated == OTHER + MARKER.format(home="/h") + "\n" + newer + "\n" and "updated" in what
    assert remove_cron_line(updated, "/h")[0] == OTHER
    assert remove_cron_line(OTHER, "/h")[0] is None


def test_a_hand_written_line_for_the_home_is_not_doubled():
    mine = "* * * * * cd /h && .venv/bin/python scheduler.py tick >> logs/tick.log 2>&1\n"
    with pytest.raises(InstallError, match="not added by install"):
        add_cron_line(mine, "/h", crontab_line.render("/h", "/usr/bin/python3"))
    text, _ = add_cron_line(mine, "/other", crontab_line.render("/other", "/usr/bin/python3"))
    assert text is not None and text.startswith(mine)  # another home's line is no obstacle


# --------------------------------------------------------------------- the real crontab


def test_install_cron_with_the_real_crontab(home, crontab_ns):
    run, spool = crontab_ns
    user = Path(spool / os.environ.get("USER", "root"))
    cli = [sys.executable, str(SCHEDULER), "--home", str(home)]
    assert run("sh", "-c", f"printf '{OTHER}' | crontab -").returncode == 0
    first = run(*cli, "install", "--cron")
    assert first.returncode == 0, first.stderr
    listing = run("crontab", "-l").stdout
    line = crontab_line.line_for(str(home), {"PATH": _env()["PATH"]})
    assert listing.endswith(MARKER.format(home=home) + "\n" + line + "\n")
    assert OTHER in listing and user.exists()
    assert (home / "logs").is_dir()  # the shell opens logs/tick.log before the tick runs
    # ... with its umask: the log exists owner-only first (doctor's permissions check)
    assert (home / "logs" / "tick.log").stat().st_mode & 0o777 == 0o600
    again = run(*cli, "install", "--cron")
    assert again.returncode == 0 and "nothing changed" in again.stdout
    assert run("crontab", "-l").stdout == listing
    doctor = run(*cli, "doctor", "--json")
    check = {c["check"]: c for c in json.loads(doctor.stdout)}["crontab"]
    assert check["status"] == "ok" and check["detail"] == line, check
    gone = run(*cli, "uninstall", "--cron")
    assert gone.returncode == 0, gone.stderr
    assert run("crontab", "-l").stdout.endswith(OTHER)
    assert MARKER.format(home=home) not in run("crontab", "-l").stdout


def test_print_shows_the_line_and_changes_nothing(home, tmp_path):
    out = subprocess.run([sys.executable, str(SCHEDULER), "--home", str(home), "install",
                          "--cron", "--print"], capture_output=True, text=True, env=_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == crontab_line.line_for(str(home), _env())


# --------------------------------------------------------------------- systemd


@pytest.mark.parametrize("timer", [False, True])
def test_systemd_units_verify_and_uninstall_removes_them(home, tmp_path, timer):
    env = {**_env(), "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    cli = [sys.executable, str(SCHEDULER), "--home", str(home)]
    args = ["install", "--systemd", "--user", *(["--timer"] if timer else [])]
    out = subprocess.run([*cli, *args], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "cfg" / "systemd" / "user"
    units = sorted(p.name for p in folder.iterdir())
    assert len(units) == (2 if timer else 1), units
    texts = {p.name: p.read_text() for p in folder.iterdir()}
    service = next(t for n, t in texts.items() if n.endswith(".service"))
    assert f"MDCRON_HOME={home}" in service
    if timer:
        assert "KillMode=process" in service and "Type=oneshot" in service
        timer_text = next(t for n, t in texts.items() if n.endswith(".timer"))
        assert "OnCalendar=minutely" in timer_text and "AccuracySec=1s" in timer_text
    else:
        assert "KillMode=mixed" in service and " daemon" in service
    analyze = shutil.which("systemd-analyze")
    if analyze is not None:
        check = subprocess.run([analyze, "verify", *(str(folder / u) for u in units)],
                               capture_output=True, text=True, timeout=60)
        assert check.returncode == 0 and check.stderr.strip() == "", check.stderr
    again = subprocess.run([*cli, *args], capture_output=True, text=True, env=env)
    assert "nothing changed" in again.stdout
    gone = subprocess.run([*cli, "uninstall", "--systemd", "--user"], capture_output=True,
                          text=True, env=env)
    assert gone.returncode == 0, gone.stderr
    assert list(folder.iterdir()) == []


def test_install_keeps_a_hand_added_exit_zero_and_offers_it(home, crontab_ns):
    """Issue 25: re-running `install --cron` keeps `--exit-zero` someone added to the line;
    `install --cron --exit-zero` writes it; the tick line still runs (doctor: ok)."""
    run, _spool = crontab_ns
    cli = [sys.executable, str(SCHEDULER), "--home", str(home)]
    assert run(*cli, "install", "--cron").returncode == 0
    listing = run("crontab", "-l").stdout
    plain = crontab_line.line_for(str(home), {"PATH": _env()["PATH"]})
    edited = listing.replace(" tick >> ", " tick --exit-zero >> ")
    assert edited != listing
    assert run("sh", "-c", f"cat <<'EOF' | crontab -\n{edited}EOF").returncode == 0
    again = run(*cli, "install", "--cron")
    assert again.returncode == 0, again.stderr
    assert run("crontab", "-l").stdout == edited, again.stdout
    doctor = {c["check"]: c for c in json.loads(run(*cli, "doctor", "--json").stdout)}
    assert doctor["crontab"]["status"] == "ok", doctor["crontab"]
    assert run(*cli, "uninstall", "--cron").returncode == 0
    offered = run(*cli, "install", "--cron", "--exit-zero")
    assert offered.returncode == 0, offered.stderr
    line = run("crontab", "-l").stdout.splitlines()[-1]
    assert line == plain.replace(" tick >> ", " tick --exit-zero >> ")
    assert crontab_line.exit_zero(line) and not crontab_line.exit_zero(plain)
