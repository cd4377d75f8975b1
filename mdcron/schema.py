"""The state database's schema: migrations from version i to i+1, applied by store.py.

Append a step for every change; never edit a step that has shipped (a user's database already
went through it).
"""

SCHEMA_VERSION = 4

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
    # 3: the task-file cache (cache.py, fastpath.py). A cache only: deleting its rows is safe.
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
]
