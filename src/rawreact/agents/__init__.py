"""The agents: prompts, the tolerant ReAct loop, the reference notebook's loop, native tool calls,
the methods of the paper's table (`methods.solve`), reasoning without actions (Standard, CoT,
CoT-SC), guardrails, grammars, answer parsing, and the step records every loop writes.

May import: core, models, config, environments, tasks.
A new method is a module here behind `methods.solve` (and its name in config/choices.py); a new
loop writes the same `record.Trajectory`.
"""
