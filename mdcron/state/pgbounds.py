"""How long a PostgreSQL session of mdcron may hold or wait on anything (issue 23): the same
bounds for psycopg's connections (pgstate.py) and the idle tick's libpq one (pgidle.py).

A session idle inside a transaction (a host frozen right after it took the write lock) is ended
by the server after IDLE_IN_TX, which frees the lock; a lock is waited for at most LOCK_WAIT,
longer than IDLE_IN_TX, so a waiter outlasts a frozen holder; any statement ends after
STATEMENT. mdcron's write transactions are a few statements long (milliseconds), so none of
these cuts a healthy one. Keepalives notice a vanished peer in ~25 s; TCP_USER_TIMEOUT drops a
connection whose sent data stays unacknowledged for 30 s.
"""

IDLE_IN_TX, STATEMENT, LOCK_WAIT = "10s", "30s", "20s"
SESSION_BOUNDS = (f"-c idle_in_transaction_session_timeout={IDLE_IN_TX}"
                  f" -c statement_timeout={STATEMENT} -c lock_timeout={LOCK_WAIT}")
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
              "keepalives_count": 3, "tcp_user_timeout": 30_000}
