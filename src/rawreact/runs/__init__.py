"""Running and recording: from settings to a run's parts (`setup`), questions answered one by one
or by workers (`run.run_questions`), run files written after every question (`runfile`) and read
back, checked field by field (`records`).

May import: core, models, config, environments, tasks, agents.
"""
