"""Environments and their passages: `PassageEnv` (search, lookup, think, finish), the reference
notebook's environment, passage stores (SQLite) and how they are built, title matching and sentence
splitting.

May import: core, config.
A new environment is a module here that answers the same actions (`step(action) -> observation`).
"""
