"""scheduler.yaml -> typed, frozen values (Config and its sections), validated once per process.
May import: core.
"""
