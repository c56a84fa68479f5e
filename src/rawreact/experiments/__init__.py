"""Prompt experiments: variants (a name and its settings), the built-in ablations, and `compare`,
which runs every variant on the same questions and puts them side by side.

May import: core, models, config, environments, tasks, agents, runs, reports.
"""
