"""`ruff check` clean is a rule of the house: CI enforces it through the test command."""

import subprocess
import sys

from conftest import REPO


def test_ruff_check_is_clean():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", str(REPO)], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
