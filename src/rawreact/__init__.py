"""rawreact: raw-completion ReAct, in the style of the reference implementation, on local models."""

from importlib import import_module

# Public names -> the module that defines them. They are imported on first use, so that the
# `rawreact` command starts at once (and Ctrl-C during start-up ends it quietly).
_PUBLIC = {
    "actions": ("VERBS", "Action", "format_action", "parse_action", "parse_step"),
    "answers": ("parse_answer", "vote"),
    "collection": ("Collection", "load_collection", "open_passages"),
    "env": ("PassageEnv",),
    "errors": ("ContextLengthExceeded", "DataError", "GrammarError", "ModelError", "PromptError", "RawreactError"),
    "experiments": ("Variant", "compare"),
    "grammar": ("Grammar", "load_grammar"),
    "loop": ("react",),
    "record": ("Step", "Trajectory"),
    "methods": ("METHODS", "Outcome", "reason", "solve"),
    "models": ("Completion", "Model", "ScriptedModel", "load_model"),
    "prompts": ("Prompt", "load_prompt"),
    "report": ("Comparison", "compare_runs"),
    "runfile": ("RunFile", "read_run"),
    "runs": ("Result", "run_questions"),
    "store": ("PassageStore", "build_store"),
    "corpus": ("read_sources",),
    "fever": ("read_label",),
}
_WHERE = {name: module for module, names in _PUBLIC.items() for name in names}


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'rawreact' has no attribute {name!r}")
    value = getattr(import_module(f"rawreact.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__version__ = "0.1.0"

__all__ = [
    "METHODS",
    "VERBS",
    "Action",
    "Collection",
    "Comparison",
    "Completion",
    "ContextLengthExceeded",
    "DataError",
    "Grammar",
    "GrammarError",
    "Model",
    "ModelError",
    "Outcome",
    "PassageEnv",
    "PassageStore",
    "Prompt",
    "PromptError",
    "RawreactError",
    "Result",
    "RunFile",
    "ScriptedModel",
    "Step",
    "Trajectory",
    "Variant",
    "build_store",
    "compare",
    "compare_runs",
    "format_action",
    "load_collection",
    "load_grammar",
    "load_model",
    "load_prompt",
    "open_passages",
    "parse_action",
    "parse_answer",
    "parse_step",
    "react",
    "read_label",
    "read_run",
    "read_sources",
    "reason",
    "run_questions",
    "solve",
    "vote",
]
