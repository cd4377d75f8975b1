"""The real `crontab` with its spool isolated (fixture `crontab_ns`), for the install tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

SPOOL = Path("/var/spool/cron/crontabs")
OTHER = "MAILTO=me\n# my backups\n0 3 * * * /usr/local/bin/backup --all  # keep\n"


@pytest.fixture
def crontab_ns(tmp_path: Path) -> tuple[Callable[..., subprocess.CompletedProcess[str]], Path]:
    """Run a command with the real `crontab`, whose spool is a temp folder bind-mounted over
    /var/spool/cron/crontabs in a private mount namespace: the machine's crontabs are never
    touched. Skips where that is impossible (no crontab, not root, no unshare)."""
    unshare = shutil.which("unshare")
    if shutil.which("crontab") is None or not SPOOL.is_dir():
        pytest.skip("no real `crontab` (Debian: apt-get install cron)")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare to isolate the crontab spool")
    spool = tmp_path / "spool"
    spool.mkdir()
    st = SPOOL.stat()
    os.chown(spool, st.st_uid, st.st_gid)
    spool.chmod(st.st_mode & 0o7777)

    def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        wrapper = 'mount --bind "$0" /var/spool/cron/crontabs && exec "$@"'
        return subprocess.run([unshare, "--mount", "--propagation", "private", "sh", "-c",
                               wrapper, str(spool), *argv], capture_output=True, text=True,
                              env=env or _env(), timeout=60)

    probe = run("crontab", "-l")
    if "no crontab for" not in probe.stderr:
        pytest.skip(f"cannot isolate the crontab spool here: {probe.stderr.strip()}")
    return run, spool


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MDCRON_")}
