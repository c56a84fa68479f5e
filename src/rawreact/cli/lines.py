"""The lines `rawreact run` prints about a run: its header's parts, each question's result line, what the first
question cost (and whether other processes kept the cores busy), the call cache's counts, and where a run without
--out is kept."""

import sys
import time

from rawreact.agents.reasoning import Reasoning
from rawreact.config.choices import LATS, REASONING, REFLEXION, SAMPLING
from rawreact.config.settings import Settings
from rawreact.core.actions import PASSAGE_VERBS
from rawreact.core.text import inline, plural
from rawreact.models import cores
from rawreact.models.cache import CachedModel
from rawreact.runs.results import Result, cached_counts
from rawreact.runs.runfile import RunFile
from rawreact.runs.setup import shared_passages
from rawreact.tasks.collection import Question


def say_first(result: Result, started: tuple, model, quiet: bool = False) -> None:
    """The line after the first question: how long it took; and, for the embedded model at a fixed thread
    count, a line when other processes kept cores busy meanwhile (`cores.busy_line`)."""
    seconds = time.perf_counter() - started[0]
    out = result.outcome
    if not quiet:
        print(
            f"rawreact: the first {'problem' if out.program is not None else 'question'} took {seconds:.1f} s "
            f"({plural(out.model_calls, 'call')}, "
            f"{out.tokens()['completion']} tokens written); the prompt's prefix is kept, so the next ones cost less",
            file=sys.stderr,
            flush=True,
        )
    if model is not None and any(not call.cached for call in out.calls):  # a cached question computed nothing
        elsewhere = cores.busy_elsewhere(started[1], cores.sample())
        line = cores.busy_line(elsewhere, getattr(model, "n_threads", None), cores.allowed_cores())
        if line:
            print(f"rawreact: warning: {line}", file=sys.stderr, flush=True)


def say_cache(model: CachedModel, sink: RunFile | None) -> None:
    """The cache's part of a run: its counts in the manifest, and one line on stderr."""
    if sink is not None:
        sink.set_counts("cache", model.said() | cached_counts(sink.done.values()))
    print(
        f"rawreact: {model.hits} of {plural(model.hits + model.made, 'model call')} came from the cache "
        f"{model.cache.path}; the other {model.made} were computed",
        file=sys.stderr,
    )


def game_loop_said(settings: Settings, task: str) -> str:
    """The game loop of a run's header: its step limit and guardrails."""
    steps = plural(settings.steps(task), "step")
    return f", game loop ({_with_guards(f'up to {steps}', settings)})"


def program_said(config: dict) -> str:
    """The program methods' part of a run's header: the implementations, their token limit, and the isolation the
    programs run with (a run says it, since a program's verdict may depend on it)."""
    reference = config.get("rules") == "reference"
    if "program_children" in config:  # LATS: iterations of a search, each expanding a node into children
        heat = "the repository's temperatures" if reference else f"T {config['program_temperature']:g}"
        made = (f"{plural(config['iterations'], 'iteration')} of {config['program_children']} implementations, "
                f"{heat}, {plural(config['program_tests'], 'own test')} kept, ")  # fmt: skip
    elif "program_samples" in config:  # pass@k: implementations sampled a problem
        made = f"{config['program_samples']} samples a problem at T {config['program_temperature']:g} for pass@k, "
    else:
        made = "" if config.get("iterations") is None else f"up to {plural(config['iterations'], 'implementation')}, "
    rules = "; the repository's rules, call for call" if reference else ""
    return f" ({made}{config['max_tokens']} tokens an implementation; programs run with {config['sandbox']}{rules})"


def protocol_said(config: dict) -> str:
    """Which protocol a HumanEval run is, where it is not that of the published figures: rawreact's completion
    prompts (the default, for any model), where the figures in docs/programs.md were measured with its chat
    prompts (`--prompt chat`, for a model with a ChatML template such as Qwen's); "" for the chat prompts."""
    if config.get("program_prompts") != "prompts/programs/":
        return ""
    return (
        "HumanEval with the completion prompts (prompts/programs/, the default: the model continues the function "
        "after two exemplars); the published figures (docs/programs.md: Qwen2.5-Coder-1.5B's 0.720 against its "
        "report's 70.7) were measured with --prompt chat, the chat prompts, for a model with a ChatML template"
    )


def loop_said(settings: Settings) -> str:
    """The loop of a run's header, for a method that acts, and a Reflexion method's trials."""
    if settings.method in REFLEXION:
        trials = (
            f", up to {plural(settings.question_trials, 'trial')} (strategy {settings.strategy}, evaluator "
            f"{settings.evaluator}" + (", gold context" if settings.context == "gold" else "") + ")"
        )
        return trials + ("" if REFLEXION[settings.method] == "cot" else acting_said(settings))
    if settings.method in REASONING:
        return ""
    if settings.method == "tools":
        return f", native tool calls ({plural(settings.sentences, 'sentence')} per search)"
    return acting_said(settings)


def acting_said(settings: Settings) -> str:
    """The loop of a method that takes text actions, for a run's header."""
    sentences = plural(settings.sentences, "sentence")
    return f", {settings.loop} loop ({_with_guards(f'{sentences} per search', settings)})"


def _with_guards(first: str, settings: Settings) -> str:
    """A loop's part of the header, then its guardrails where they are on."""
    parts = [first]
    parts += [f"repeats {settings.repeats}"] if settings.repeats != "off" else []
    parts += [f"budget {settings.budget} tokens"] if settings.budget is not None else []
    return ", ".join(parts)


def verbs_said(config: dict) -> str:
    """The verbs an `--env` run offers beyond the passage set, for its header (nothing for other runs)."""
    extra = [v["shown"] or v["name"] for v in config.get("verbs", []) if PASSAGE_VERBS.get(v["name"]) is None]
    return f", with the verbs of --env {config['env']}: {', '.join(extra)}" if extra else ""


def passages_said(settings: Settings) -> str:
    """Where searches look, for a run's header when it is not each question's own paragraphs."""
    if settings.passages is None:
        return ""
    passages = shared_passages(settings.passages)
    what = "the store" if passages.kind == "store" else "the pooled passages of"
    return f", searching {what} {settings.passages} ({plural(passages.count, 'page')}; the open setting)"


def support_said(value: bool | None) -> str:
    return "" if value is None else ", answer seen" if value else ", answer not seen"


def sampling_said(settings: Settings) -> str:
    """The CoT-SC settings of a run's header, if it samples; LATS's, with what rewards a finish."""
    if settings.method == LATS:
        judge = (
            "em: the gold answer, an oracle, as the paper's"
            if settings.evaluator == "em"
            else "supported: the answer in what the path read, no gold answer"
        )
        return (
            f" ({settings.step_iterations} iterations, {settings.lats_samples} samples an expansion, T "
            f"{settings.step_lats_temperature:g}, seed {settings.seed}; a finish rewarded by {judge}; "
            f"{'its repository' if settings.loop == 'reference' else 'rawreact'}'s rules)"
        )
    if settings.method not in SAMPLING:
        return ""
    return f" (n {settings.cot_samples}, T {settings.sample_temperature:g}, seed {settings.seed})"


def reasoning_text(question: Question, reasoning: Reasoning) -> str:
    """A Standard or CoT answer as the model wrote it; for CoT-SC, the first sample and the vote."""
    text = f"\n=== {inline(question.id)} ({reasoning.method})\n{question.header}: {question.question}\n"
    if reasoning.samples:
        text += f"{reasoning.cue}{reasoning.samples[0].call.text}\n"
    if reasoning.method == "cot-sc":
        tally = reasoning.vote
        text += f"votes ({len(reasoning.samples)} samples): {tally.counts or 'no answers'}\n"
    return text


def score_cell(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def result_line(n: int, total: int, result: Result) -> str:
    out = result.outcome
    if out.program is not None:  # a program: whether its hidden tests passed, and why not
        hidden = out.program["hidden"]
        why = "" if hidden["passed"] else f": {hidden['reason']}"
        return (
            f"result [{n}/{total}] {inline(result.question.id)}: {result.task.outcome(result.scores)} (hidden tests"
            f"{why}) after {plural(out.taken, 'implementation')}, {plural(out.model_calls, 'call')}, "
            f"{out.tokens()['completion']} tokens written, {out.seconds:.1f} s"
        )
    if result.task.scoring == "outcome":  # the environment judged it: won or not, and its reward
        return (
            f"result [{n}/{total}] {inline(result.question.id)}: {result.task.outcome(result.scores)} "
            f"({'' if result.score is None else f'score {result.score:g}, '}reward {result.reward or 0.0:.2f}); "
            f"ended by {out.ended} after {plural(out.taken, 'step')}, {plural(out.model_calls, 'call')}, "
            f"{out.invalid_actions} invalid, {plural(out.repeats, 'repeat')}, {out.seconds:.1f} s"
        )
    branch = f" (answered by {out.branch})" if out.branch != out.method else ""
    if out.trials is not None:  # Reflexion: which trial answered, and whether its evaluator passed it
        verdict_of = "passed" if out.trials[-1].passed else "failed"
        branch = f" (trial {len(out.trials)}, {verdict_of} by {(out.reflexion or {}).get('evaluator', '?')})"
    return (
        f"result [{n}/{total}] {inline(result.question.id)}: {result.task.outcome(result.scores)} "
        f"(EM {score_cell(result.em, '{:.0f}')}, F1 {score_cell(result.f1, '{:.2f}')}) "
        f"answer {out.answer!r}{branch}, gold {result.question.answer!r}; ended by {out.ended} after "
        f"{plural(out.taken, 'step')}, {plural(out.model_calls, 'call')}, {out.invalid_actions} invalid, "
        f"{out.fallback_calls} fallback, {plural(out.repeats, 'repeat')}{support_said(result.supported)}, "
        f"{out.seconds:.1f} s"
    )
