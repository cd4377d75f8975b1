"""The Anthropic client at arm's length, prompt templates, and comments read before a run. May
import: core, settings, tasks, state, schedule, alerts, hosts.
"""
