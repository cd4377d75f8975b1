"""The state database and all of mdcron's SQL: one module per table behind `protocol.State`.

Each table module holds its statements, written once in SQLite's spelling; pgstate.translate
turns them into PostgreSQL's, so both back ends run the same text. `store.Store` (the
connection, its transactions and migrations, schema.py) composes the tables into one object
that satisfies `protocol.State`. Rows come back named (NamedTuples and frozen records of
core/records.py; whole `runs`/`incidents`/`comments` rows as dicts keyed by column). Also
here: the spool of results a lost connection could not take, `state copy`, the lost-database
guard, the stamps a clock that went back left behind (clockback.py), and the idle proof
(idle.py, pgidle.py), which reads the state with the standard library only, for speed.
Table modules never import store.py (it imports them).
May import: core, settings, tasks.
"""
