"""Running claimed slots: the tick, dispatch, the escalation ladder (escalation_policy.py is its
pure decision, ladder.py climbs it, attempt.py runs one attempt), processes and the account they
run as (identity.py), locks, resources, recovery, retention, the clock going back
(clock_back.py), the tick's log. May import: core, settings, tasks, state, schedule, alerts,
hosts, claude.
"""
