"""rawreact: raw-completion ReAct, in the style of the reference implementation, on local models."""

from rawreact.actions import VERBS, Action, format_action, parse_action, parse_step
from rawreact.collection import Collection, load_collection
from rawreact.env import PassageEnv
from rawreact.errors import ContextLengthExceeded, DataError, GrammarError, ModelError, PromptError, RawreactError
from rawreact.experiments import Variant, compare
from rawreact.grammar import Grammar, load_grammar
from rawreact.loop import Step, Trajectory, react
from rawreact.models import Completion, Model, ScriptedModel, load_model
from rawreact.prompts import Prompt, load_prompt
from rawreact.report import Comparison, compare_runs
from rawreact.runs import Result, RunFile, read_run, run_questions

__version__ = "0.1.0"

__all__ = [
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
    "PassageEnv",
    "Prompt",
    "PromptError",
    "RawreactError",
    "Result",
    "RunFile",
    "ScriptedModel",
    "Step",
    "Trajectory",
    "Variant",
    "compare",
    "compare_runs",
    "format_action",
    "load_collection",
    "load_grammar",
    "load_model",
    "load_prompt",
    "parse_action",
    "parse_step",
    "react",
    "read_run",
    "run_questions",
]
