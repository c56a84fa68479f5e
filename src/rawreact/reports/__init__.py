"""Reading run files: summaries and tables, comparisons with bootstrap intervals, `show`, the
self-contained HTML page (with its SVG charts and assets) and fine-tuning export.

May import: core, models, config, environments, tasks, agents, runs.
A new report format is a module here that reads run files through `runs.records.read_run`.
"""
