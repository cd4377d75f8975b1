"""Values every layer shares: the Clock, durations, a Problem found in a file, a run's Outcome, the
`${VAR}` pattern, the URL part that may be shown, cron maths (cron.py: macros, @every, @at,
zones, DST; pure; cron_walls.py steps the wall times cron fields match), the owner-only file
helpers, YAML read with bounds (safe_yaml.py), the range of instants (limits.py), users and
groups by name (accounts.py) and the zone names people get wrong (zones.py). Imports no other
mdcron folder.
"""
