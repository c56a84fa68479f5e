"""The words every layer shares: errors, shipped data files, text helpers, the action parser, answer
metrics (EM, F1) and bootstrap statistics. Pure functions and values; nothing here runs a model.

May import: nothing of rawreact's but this layer.
A new shared helper goes here only if two layers above need it and it needs nothing above.
"""
