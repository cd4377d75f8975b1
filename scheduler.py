#!/usr/bin/env python3
"""mdcron entry point: `python3 scheduler.py <command>`; cron runs `tick` every minute."""

import sys

from mdcron.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
