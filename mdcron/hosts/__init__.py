"""Several hosts on one PostgreSQL state: leases, what another host's runs and suspensions mean
here, each host's copy of the task files (the tick's steps that use them: run/shared_tick.py).
May import: core, settings, tasks, state, schedule, alerts.
"""
