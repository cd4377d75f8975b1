#!/usr/bin/env python3
"""mdcron entry point: `python3 scheduler.py <command>`; cron runs `tick` every minute.

This file stands above every layer of mdcron/, so it is where the top layer's command joins the
CLI: `web` (web/server.cmd_web) imports cli/, and cli/ never imports web/ (README, Design).
"""

import gc
import sys

from mdcron.core import collector

collector.hold()  # issue 27: no collections until a tick's first task started (core/collector.py)
from mdcron.cli.main import main  # noqa: E402  (after the hold: its imports are what it spares)


def web(home, args) -> int:
    from mdcron.web.server import cmd_web  # lazy: Mission Control only for `web`, never a tick

    return cmd_web(home, args)


if __name__ == "__main__":
    code = main(above={"web": web})
    # What is left dies with the process: the collector's last passes over it at exit cost a
    # one-due tick ~6 ms and a 10,000-task `list --json` ~10 ms (issue 27). Every file and
    # database was closed by its command; atexit, stdio flushing and refcounts still run.
    gc.freeze()
    sys.exit(code)
