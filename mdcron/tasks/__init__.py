"""Task files (tasks/*.md): the Task model, parsing with every problem reported, byte-preserving
edits, the paths a task may use, what in tasks/ is not a task (not_tasks.py). May import: core,
settings.
"""
