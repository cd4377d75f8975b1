"""The commands: argument parsing, one function per command, tables, doctor, install, the daemon,
and the read-only views (queries.py) the web shares. May import every folder but web: the `web`
command's handler is web/server.cmd_web, joined to the CLI by the entry point (scheduler.py).
"""
