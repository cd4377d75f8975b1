"""Task files (tasks/*.md): the Task model, parsing with every problem reported, byte-preserving
edits, the paths a task may use. May import: core, settings.
"""
