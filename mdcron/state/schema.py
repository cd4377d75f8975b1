"""The state database's schema: migrations from version i to i+1, applied by store.py.

Append a step for every change; never edit a step that has shipped (a user's database already
went through it).
"""

SCHEMA_VERSION = 9

# Each entry migrates from version i to i+1.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL,
        scheduled_for REAL NOT NULL,      -- the slot; for manual runs the moment it was asked
        trigger TEXT NOT NULL,            -- schedule | manual
        attempt INTEGER NOT NULL DEFAULT 1,
        kind TEXT NOT NULL DEFAULT 'run', -- run | retry | heal
        status TEXT NOT NULL,   -- running success failed timeout skipped crashed
        started_at REAL NOT NULL,
        finished_at REAL,
        duration_ms INTEGER,
        exit_code INTEGER,
        error TEXT,
        output_tail TEXT,
        log_path TEXT,
        owner_pid INTEGER,                -- the tick that claimed the row, to tell a crash
        owner_start INTEGER,
        owner_boot TEXT,
        task_file TEXT,
        extra TEXT                        -- JSON: tokens, diagnosis, ...
    );
    CREATE UNIQUE INDEX runs_one_per_slot ON runs(task_id, scheduled_for)
        WHERE trigger = 'schedule' AND attempt = 1;
    CREATE INDEX runs_by_task ON runs(task_id, id);
    CREATE INDEX runs_running ON runs(status) WHERE status = 'running';
    CREATE INDEX runs_by_start ON runs(started_at);
    CREATE TABLE task_state (
        task_id TEXT PRIMARY KEY,
        first_seen REAL NOT NULL,
        not_before REAL NOT NULL,   -- earlier fires never run (first seen, re-enabled)
        last_slot REAL,                    -- the latest slot claimed (run or skipped)
        enabled INTEGER NOT NULL DEFAULT 1,
        consecutive_failures INTEGER NOT NULL DEFAULT 0,
        path TEXT
    );
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
    """,
    # 2: notifications (outbox, collapsing), incidents, Claude heals and comments.
    """
    CREATE TABLE outbox (
        id INTEGER PRIMARY KEY,
        created_at REAL NOT NULL,
        destination TEXT NOT NULL,        -- a destination key from the config
        task_id TEXT,
        kind TEXT NOT NULL,               -- failure success recovered suspended timeout ...
        forced INTEGER NOT NULL DEFAULT 0,
        title TEXT NOT NULL,
        body TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',  -- pending held sent dead
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL,
        last_error TEXT,
        sent_at REAL
    );
    CREATE INDEX outbox_open ON outbox(status) WHERE status IN ('pending', 'held');
    CREATE TABLE alert_windows (
        task_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        window_start REAL NOT NULL,
        suppressed INTEGER NOT NULL DEFAULT 0,   -- alerts collapsed since window_start
        PRIMARY KEY (task_id, kind)
    );
    CREATE TABLE incidents (
        id INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL,            -- '*' for scheduler-level incidents
        kind TEXT NOT NULL,               -- suspended timeout crashed_tick duplicate_id ...
        status TEXT NOT NULL DEFAULT 'open',
        opened_at REAL NOT NULL,
        last_seen REAL NOT NULL,
        count INTEGER NOT NULL DEFAULT 1,
        last_error TEXT,
        output_tail TEXT,
        resolved_at REAL,
        resolution TEXT
    );
    CREATE UNIQUE INDEX incidents_one_open ON incidents(task_id, kind) WHERE status = 'open';
    CREATE TABLE heals (
        id INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL,
        run_id INTEGER,
        attempt INTEGER NOT NULL,
        created_at REAL NOT NULL,
        diagnosis TEXT,
        diff TEXT,
        backup_dir TEXT,
        outcome TEXT
    );
    CREATE INDEX heals_by_task ON heals(task_id, id);
    CREATE TABLE comments (
        id INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL,
        author TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at REAL NOT NULL,
        read_at REAL,
        reply TEXT,
        action TEXT
    );
    CREATE INDEX comments_unread ON comments(task_id) WHERE read_at IS NULL;
    ALTER TABLE task_state ADD COLUMN alerted INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE task_state ADD COLUMN probation_until REAL;
    """,
    # 3: the task-file cache (cache.py, state/idle.py). A cache only: deleting its rows is safe.
    # Any change to a row that cache.save did not make leaves meta cache_sealed = 0: rebuilt.
    """
    CREATE TABLE task_cache (
        path TEXT PRIMARY KEY,            -- the task file, absolute
        size INTEGER NOT NULL,            -- its stat when it was read ...
        mtime_ns INTEGER NOT NULL,
        ino INTEGER NOT NULL,
        ctime_ns INTEGER NOT NULL,
        read_ns INTEGER NOT NULL,         -- ... and the real time just before (racy rule)
        deps TEXT NOT NULL DEFAULT '',    -- outside paths its checks looked at; '*': always read
        task_id TEXT,                     -- NULL: the file has errors
        enabled INTEGER NOT NULL DEFAULT 0,
        problems TEXT,                    -- JSON; NULL when none
        next_due REAL,                    -- first fire that could run; NULL: none (if due_nb set)
        due_last REAL,                    -- task_state.last_slot next_due was computed from
        due_nb REAL,                      -- task_state.not_before it came from; NULL: not yet
        due_zone TEXT NOT NULL DEFAULT '' -- the system zone it depends on; '': none
    );
    CREATE INDEX task_cache_ids ON task_cache(task_id) WHERE task_id IS NOT NULL;
    CREATE INDEX task_cache_problems ON task_cache(path) WHERE problems IS NOT NULL;
    CREATE TRIGGER task_cache_insert AFTER INSERT ON task_cache BEGIN
        UPDATE meta SET value = '0' WHERE key = 'cache_sealed';
    END;
    CREATE TRIGGER task_cache_update AFTER UPDATE ON task_cache BEGIN
        UPDATE meta SET value = '0' WHERE key = 'cache_sealed';
    END;
    CREATE TRIGGER task_cache_delete AFTER DELETE ON task_cache BEGIN
        UPDATE meta SET value = '0' WHERE key = 'cache_sealed';
    END;
    CREATE TABLE task_cache_data (
        path TEXT PRIMARY KEY,
        task TEXT NOT NULL,               -- JSON of the Task
        crc INTEGER NOT NULL
    );
    """,
    # 4: the fire after next_due (cache.py), so a plain due slot is decided without croniter.
    """
    ALTER TABLE task_cache ADD COLUMN due_after REAL; -- the fire after next_due; NULL: unknown
    """,
    # 5: issue 11, several hosts: the host that claimed or ran a row (config `host`); a
    # suspension every host honours until the task is enabled again (hosts/peers.py).
    """
    ALTER TABLE runs ADD COLUMN host TEXT;
    ALTER TABLE task_state ADD COLUMN suspended_at REAL;
    ALTER TABLE task_state ADD COLUMN suspended_by TEXT;
    CREATE TABLE task_files (               -- each host's copy of each task file (hosts/files.py)
        task_id TEXT NOT NULL,
        host TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        seen_at REAL NOT NULL,
        PRIMARY KEY (task_id, host)
    );
    CREATE TABLE hosts (name TEXT PRIMARY KEY, seen_at REAL NOT NULL);  -- last tick, db clock
    """,
    # 6: issue 11, per-task leases across hosts (lease.py): holder, fencing token, expiry by
    # the database's clock. Used with a shared state only; SQLite gets the table for one schema.
    """
    CREATE TABLE leases (
        task_id TEXT PRIMARY KEY,
        holder TEXT,                    -- host:pid:boot-id of the tick; NULL once released
        host TEXT NOT NULL,
        run_id INTEGER,                 -- the run that took it
        fence INTEGER NOT NULL,         -- +1 at every acquisition; a stale holder's writes fail
        acquired_at REAL NOT NULL,      -- the database's clock
        expires_at REAL                 -- the database's clock; renewed while the run lives
    );
    """,
    # 7: issue 23, a suspension is lifted by a change of the file's content, not its mtime:
    # the hash of the file as suspended, minus the keys the scheduler wrote (hosts/peers.py).
    """
    ALTER TABLE task_state ADD COLUMN suspended_hash TEXT;
    """,
    # 8: issue 24, who did what from the dashboard or the CLI (state/audit.py).
    """
    CREATE TABLE IF NOT EXISTS audit (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        who TEXT NOT NULL,             -- 'web session 1a2b3c4d (alice)', 'cli (alice)', ...
        action TEXT NOT NULL,          -- enable, disable, pause, run, comment, revert-heal, ...
        task_id TEXT,                  -- NULL: not about one task (maintenance mode)
        detail TEXT,
        origin TEXT                    -- the remote address, or the terminal
    );
    CREATE INDEX IF NOT EXISTS audit_task ON audit(task_id, id);
    """,
    # 9: issue 27, the fields `list` reads of a cached task, beside its whole JSON
    # (task_cache.listing_of: '<crc32> <JSON array>'; NULL: none, the whole JSON is read).
    """
    ALTER TABLE task_cache_data ADD COLUMN listing TEXT;
    """,
]

# PostgreSQL (issue 11, pgstate.py): a new database gets this, the schema at version 5, in one
# step, then the steps of PG_MIGRATIONS from 5 on. The same tables and columns in the same
# order (so `SELECT *` rows match), with PostgreSQL's types; no task-file cache: that stays
# in each host's own state/mdcron.db.
# A later version appends its PostgreSQL step to PG_MIGRATIONS, indexed like MIGRATIONS.
PG_SCHEMA = """
CREATE TABLE runs (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    task_id TEXT NOT NULL,
    scheduled_for DOUBLE PRECISION NOT NULL,
    trigger TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    kind TEXT NOT NULL DEFAULT 'run',
    status TEXT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    finished_at DOUBLE PRECISION,
    duration_ms BIGINT,
    exit_code INTEGER,
    error TEXT,
    output_tail TEXT,
    log_path TEXT,
    owner_pid INTEGER,
    owner_start BIGINT,
    owner_boot TEXT,
    task_file TEXT,
    extra TEXT,
    host TEXT
);
-- the claim: one scheduled first attempt per (task, slot), across every host
CREATE UNIQUE INDEX runs_one_per_slot ON runs(task_id, scheduled_for)
    WHERE trigger = 'schedule' AND attempt = 1;
CREATE INDEX runs_by_task ON runs(task_id, id);
CREATE INDEX runs_running ON runs(status) WHERE status = 'running';
CREATE INDEX runs_by_start ON runs(started_at);
CREATE TABLE task_state (
    task_id TEXT PRIMARY KEY,
    first_seen DOUBLE PRECISION NOT NULL,
    not_before DOUBLE PRECISION NOT NULL,
    last_slot DOUBLE PRECISION,
    enabled INTEGER NOT NULL DEFAULT 1,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    path TEXT,
    alerted INTEGER NOT NULL DEFAULT 0,
    probation_until DOUBLE PRECISION,
    suspended_at DOUBLE PRECISION,
    suspended_by TEXT
);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE task_files (
    task_id TEXT NOT NULL,
    host TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    seen_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (task_id, host)
);
CREATE TABLE hosts (name TEXT PRIMARY KEY, seen_at DOUBLE PRECISION NOT NULL);
CREATE TABLE outbox (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    created_at DOUBLE PRECISION NOT NULL,
    destination TEXT NOT NULL,
    task_id TEXT,
    kind TEXT NOT NULL,
    forced INTEGER NOT NULL DEFAULT 0,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending',
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at DOUBLE PRECISION,
    last_error TEXT,
    sent_at DOUBLE PRECISION
);
CREATE INDEX outbox_open ON outbox(status) WHERE status IN ('pending', 'held');
CREATE TABLE alert_windows (
    task_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    window_start DOUBLE PRECISION NOT NULL,
    suppressed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, kind)
);
CREATE TABLE incidents (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    task_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open',
    opened_at DOUBLE PRECISION NOT NULL,
    last_seen DOUBLE PRECISION NOT NULL,
    count INTEGER NOT NULL DEFAULT 1,
    last_error TEXT,
    output_tail TEXT,
    resolved_at DOUBLE PRECISION,
    resolution TEXT
);
CREATE UNIQUE INDEX incidents_one_open ON incidents(task_id, kind) WHERE status = 'open';
CREATE TABLE heals (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    task_id TEXT NOT NULL,
    run_id BIGINT,
    attempt INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    diagnosis TEXT,
    diff TEXT,
    backup_dir TEXT,
    outcome TEXT
);
CREATE INDEX heals_by_task ON heals(task_id, id);
CREATE TABLE comments (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    task_id TEXT NOT NULL,
    author TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    read_at DOUBLE PRECISION,
    reply TEXT,
    action TEXT
);
CREATE INDEX comments_unread ON comments(task_id) WHERE read_at IS NULL;
-- what a host's idle tick compares with its own copy (pgidle.py): every statement that changes
-- task_state, runs or outbox moves state_version, in the same transaction
INSERT INTO meta(key, value) VALUES ('state_version', '0');
CREATE FUNCTION mdcron_state_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'state_version';
    RETURN NULL;
END $$;
CREATE TRIGGER task_state_changed AFTER INSERT OR UPDATE OR DELETE ON task_state
    FOR EACH STATEMENT EXECUTE FUNCTION mdcron_state_changed();
CREATE TRIGGER runs_changed AFTER INSERT OR UPDATE OR DELETE ON runs
    FOR EACH STATEMENT EXECUTE FUNCTION mdcron_state_changed();
CREATE TRIGGER outbox_changed AFTER INSERT OR UPDATE OR DELETE ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION mdcron_state_changed();
"""

PG_SCHEMA_VERSION = 5  # the version PG_SCHEMA creates

PG_MIGRATIONS: dict[int, str] = {  # version i -> i+1, for i >= 5
    5: """
CREATE TABLE leases (
    task_id TEXT PRIMARY KEY,
    holder TEXT,
    host TEXT NOT NULL,
    run_id BIGINT,
    fence BIGINT NOT NULL,
    acquired_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION
);
""",
    6: """
ALTER TABLE task_state ADD COLUMN suspended_hash TEXT;
""",
    7: """
CREATE TABLE IF NOT EXISTS audit (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at DOUBLE PRECISION NOT NULL,
    who TEXT NOT NULL,
    action TEXT NOT NULL,
    task_id TEXT,
    detail TEXT,
    origin TEXT
);
CREATE INDEX IF NOT EXISTS audit_task ON audit(task_id, id);
""",
    8: """
SELECT 1; -- 9 adds a column to the task-file cache, which is each host's own SQLite file
""",
}
