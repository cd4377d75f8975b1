"""Alerts: the outbox (quiet hours, collapsing, delivery), incidents, the heartbeat, and what
follows a run. May import: core, settings, tasks, state, schedule.
"""
