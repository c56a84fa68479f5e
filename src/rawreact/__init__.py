"""rawreact: raw-completion ReAct, in the style of the reference implementation, on local models."""

from importlib import import_module

# Public names -> the module that defines them. They are imported on first use, so that the
# `rawreact` command starts at once (and Ctrl-C during start-up ends it quietly).
_PUBLIC = {
    "core.actions": ("PASSAGE_VERBS", "VERBS", "Action", "Verbs", "format_action", "parse_action", "parse_step"),
    "core.verbs": ("Verb", "verb_of"),
    "core.errors": (
        "ContextLengthExceeded",
        "DataError",
        "EnvironmentSetupError",
        "GrammarError",
        "ModelError",
        "PromptError",
        "RawreactError",
    ),
    "environments.base": ("Environment",),
    "config.choices": ("METHODS",),
    "config.settings": ("Settings",),
    "config.files": ("read_settings",),
    "environments.env": ("PassageEnv",),
    "environments.store": ("PassageStore",),
    "environments.build": ("build_store",),
    "tasks.collection": ("Collection",),
    "tasks.loading": ("load_collection", "open_passages"),
    "tasks.corpus": ("read_sources",),
    "tasks.fever": ("read_label",),
    "agents.answers": ("parse_answer", "vote"),
    "agents.grammar": ("Grammar", "load_grammar"),
    "agents.loop": ("react",),
    "agents.record": ("Step", "Trajectory"),
    "agents.methods": ("Outcome", "solve"),
    "agents.reasoning": ("reason",),
    "agents.prompts": ("Prompt", "load_prompt"),
    "models": ("Completion", "Model", "ScriptedModel", "load_model"),
    "models.cache": ("CachedModel",),
    "runs.results": ("Result",),
    "runs.run": ("run_questions",),
    "runs.plan": ("RunPlan", "make_plan"),
    "runs.runfile": ("RunFile",),
    "runs.records": ("read_run",),
    "reports.comparison": ("Comparison", "compare_runs"),
    "experiments.variants": ("Variant",),
    "experiments.compare": ("compare",),
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


__version__ = "0.2.0"

__all__ = [
    "METHODS",
    "PASSAGE_VERBS",
    "VERBS",
    "Action",
    "Collection",
    "Comparison",
    "CachedModel",
    "Completion",
    "ContextLengthExceeded",
    "DataError",
    "Environment",
    "EnvironmentSetupError",
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
    "Settings",
    "RunFile",
    "ScriptedModel",
    "Step",
    "Trajectory",
    "Variant",
    "Verb",
    "Verbs",
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
    "read_settings",
    "read_sources",
    "reason",
    "run_questions",
    "solve",
    "verb_of",
    "vote",
]
