"""Self-heal: the Claude healer (budgets, probation, revert) and the tools it gives the model, with
their guard rails. May import: core, settings, tasks, state, schedule, alerts, hosts, claude, run.
"""
