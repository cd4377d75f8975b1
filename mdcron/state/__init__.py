"""The state's tables and their SQL: the one place outside the idle fast path where mdcron
speaks SQL.

Each module owns one table (or two that always change together) and holds its statements,
written once in SQLite's spelling; pgstate.translate turns them into PostgreSQL's, so both back
ends run the same text. `protocol.State` lists the operations the tick, the commands, the
dashboard and the daemon use; `store.Store` (the connection, its transactions and migrations)
composes the tables into one object that satisfies it. Rows come back named (NamedTuples and
frozen dataclasses; whole `runs`/`incidents`/`comments` rows as dicts keyed by column).

May import: the value types (outcome, clock, schema) and each other; never store.py (it
imports us), never a module that decides or runs anything.
"""
