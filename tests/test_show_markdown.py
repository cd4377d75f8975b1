"""`show` in a terminal renders the task's Markdown body with rich; piped, it prints the text
as written (scripts and grep see the file's own lines)."""

from __future__ import annotations

from conftest import run_cli
from test_cli_output import in_a_terminal

BODY = "# Nightly backup\n\n- first **this**\n- then that\n"


def test_a_terminal_gets_the_body_rendered_and_a_pipe_gets_it_as_written(home, write_task):
    write_task("doc", body=BODY, schedule="0 9 * * *", command="true")
    shown = in_a_terminal(home, "show", "doc")
    assert "• first this" in shown.replace("\x1b[1m", "").replace("\x1b[0m", "")
    assert "# Nightly backup" not in shown and "**this**" not in shown
    piped = run_cli(home, "show", "doc").stdout
    assert piped.rstrip().endswith(BODY.rstrip())
