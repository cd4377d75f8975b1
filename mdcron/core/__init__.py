"""Values every layer shares: the Clock, durations, a Problem found in a file, a run's Outcome, the
`${VAR}` pattern, the URL part that may be shown, cron maths (cron.py: macros, @every, @at,
zones, DST; pure), and the owner-only file helpers. Imports no other mdcron folder.
"""
