"""When things run, given the tasks and the state: the first-seen rule, once_per, pauses, chains,
and the task-file cache that carries each task's next due time (core/cron.py does the maths).
May import: core, settings, tasks, state.
"""
