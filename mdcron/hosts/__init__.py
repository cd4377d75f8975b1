"""Several hosts on one PostgreSQL state: leases, each host's copy of the task files, the tick's
shared steps. May import: core, settings, tasks, state, schedule, alerts.
"""
