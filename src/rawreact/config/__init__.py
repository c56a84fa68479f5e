"""What a run is: `Settings` (one frozen, checked value), the names a setting may take (`choices`),
settings files (TOML, or a finished run's manifest) and the paper's setup (`--reference`).

May import: core, models.
A new setting is a field of `Settings` (with its check in `value_problem` or `Settings.problem`);
a new method, loop or grammar mode is first a name in `choices`, then a room in agents/.
"""
