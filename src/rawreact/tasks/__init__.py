"""Tasks and their data: questions and collections, the readers of HotpotQA, FEVER, JSONL and
envs/ files, the corpora a passage store is built from, and FEVER's label scoring.

May import: core, config, environments.
A new dataset is a reader module here that `loading.load_collection` recognises by its layout.
"""
