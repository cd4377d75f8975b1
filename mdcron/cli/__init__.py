"""The commands: argument parsing, one function per command, tables, doctor, install, the daemon,
and the read-only views (queries.py) the web shares. May import every folder but web, which only
the `web` command imports, inside the command.
"""
