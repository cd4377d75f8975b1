"""mdcron: a file-driven cron scheduler. Task files in tasks/*.md, one tick a minute."""

__version__ = "0.1.0"
