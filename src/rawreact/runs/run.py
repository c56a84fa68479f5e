"""Runs over many questions: each question answered, scored, and written to its run file as it finishes (the
questions' runner; what each one gives, its `Result`, is `results.py`'s).

The run file itself (its lines, manifest, lock and resume) is `runfile.py`'s.
"""

import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from pathlib import Path

from rawreact.agents.methods import solve
from rawreact.agents.prompts import Prompt
from rawreact.agents.reasoning import CUES
from rawreact.agents.record import Step
from rawreact.agents.reflexion import Trial, gold_context
from rawreact.agents.tools import check_model
from rawreact.config.choices import BACKOFFS, PROGRAMS, REFLEXION, first_method
from rawreact.core.errors import DataError, EpisodeLost, ModelError
from rawreact.core.tasks import GAME
from rawreact.environments.env import PassageEnv
from rawreact.models.base import WORKER, Model
from rawreact.runs.records import manifest_path, read_manifest, read_run
from rawreact.runs.results import Result, placement_counts
from rawreact.runs.runfile import RunFile
from rawreact.runs.trials import TrialLog
from rawreact.tasks.collection import Question

__all__ = ["Result", "RunFile", "check_context", "manifest_path", "read_manifest", "read_run", "run_questions"]


def refuse_workers(name: str, workers: int) -> ModelError:
    """The error for workers above 1 on a model loaded for one question at a time."""
    return ModelError(
        f"model {name} was loaded for one question at a time; load it with load_model(..., workers={workers}) "
        f"to decode {workers} questions together"
    )


def check_context(
    model: Model,
    prompt: Prompt,
    questions: Iterable[Question],
    max_tokens: int,
    method: str = "react",
    backoff: Prompt | None = None,
) -> None:
    """Refuse a run whose first call cannot fit the model's context window, before any call is made.

    The first call sends the few-shot prompt and the question, and asks for up to `max_tokens`; if
    that does not fit, every question would end by the context limit with no answer. A back-off's
    second part (`backoff`, its prompt) is checked the same way. Only a model that can count its
    tokens and knows its window (the embedded llama.cpp model) is checked here; a server's refusal
    ends each question as `context`, and the run's summary says so.
    """
    if method == "tools":  # a chat prompt: the model must take tool calls; a prompt too long ends as context
        check_model(model)
        return
    tokenize, n_ctx = getattr(model, "tokenize", None), getattr(model, "n_ctx", None)
    questions = list(questions)
    if tokenize is None or not isinstance(n_ctx, int) or not questions:
        return
    longest = max(questions, key=lambda q: len(q.question))
    parts = [(prompt, first_method(method))] + ([(backoff, BACKOFFS[method][1])] if backoff is not None else [])
    for part_prompt, part in parts:
        if method in PROGRAMS:  # an implementation continues the problem's prompt after the exemplars
            needed = len(tokenize(f"{part_prompt.text}{longest.question}")) + max_tokens
        else:
            needed = len(tokenize(f"{part_prompt.text}{longest.header}: {longest.question}\n{CUES[part]}")) + max_tokens
        if needed > n_ctx:
            raise ModelError(
                f"the prompt ({part_prompt.source}) with the longest question and --max-tokens {max_tokens} needs "
                f"{needed} tokens, but {model.name}'s context window is {n_ctx}; raise --n-ctx to at least "
                f"{needed} (more for the steps that follow), lower --max-tokens, or use fewer exemplars (-k)"
            )


def run_questions(
    questions: Iterable[Question],
    env: Callable[[Question], PassageEnv],
    model: Model,
    prompt: Prompt,
    *,
    out: str | Path | RunFile | None = None,
    on_step: Callable[[Question, Step], None] | None = None,
    workers: int = 1,
    stop: Callable[[], bool] | None = None,
    on_trial: Callable[[Question, Trial], None] | None = None,
    **solve_options,
) -> Iterator[Result]:
    """Run `solve` (by default ReAct) on each question, yielding each result as soon as it is done.

    `env` gives the environment of a question. With `out` (a path, or an open RunFile), each
    result is appended to the run file and flushed before it is yielded, so an interrupted run
    loses nothing finished; questions the run file already holds are skipped. `workers` > 1 keeps
    that many questions in flight at once, on a model that allows it (`model.concurrent`, a
    server); results then come in the order they finish. `stop()` is asked before each question
    starts: once it says True no question starts, and the ones under way finish and are written.
    """
    if workers > 1 and not getattr(model, "concurrent", False):
        raise refuse_workers(model.name, workers)
    if solve_options.get("method") in REFLEXION or "lats" in solve_options:  # checked before the first one starts
        questions = list(questions)
        settings = solve_options.get("reflexion") or solve_options.get("lats") or {}
        problem = unrunnable(questions, settings.get("evaluator", "em"), settings.get("context", "none"))
        if problem:
            raise DataError(problem)
    sink = RunFile(out) if isinstance(out, (str, Path)) else out  # opened now: a bad path fails early
    pending = (q for q in questions if sink is None or q.id not in sink.done)
    reflexion = solve_options.pop("reflexion", None)
    log = None
    if solve_options.get("method") in REFLEXION and sink is not None:
        log = TrialLog(sink.path, prompt.text, resumed="resumes" in sink.manifest)
    answer = answerer(env, model, prompt, on_step=on_step, on_trial=on_trial, reflexion=reflexion, log=log,
                      **solve_options)  # fmt: skip
    results = _sequential(pending, answer, stop) if workers <= 1 else _parallel(pending, answer, stop, workers)
    return _written(results, sink, log)


def answerer(
    env: Callable[[Question], PassageEnv],
    model: Model,
    prompt: Prompt,
    *,
    on_step: Callable[[Question, Step], None] | None = None,
    on_trial: Callable[[Question, Trial], None] | None = None,
    reflexion: dict | None = None,
    log: TrialLog | None = None,
    **solve_options,
) -> Callable[[Question], Result]:
    """The function that answers one question of a run (`run_questions`'s, and each Ray actor's): its
    environment made, `solve` run on it, started over on another server when a fleet's server fails."""

    def answer(question: Question) -> Result:
        step_hook = None if on_step is None else (lambda step: on_step(question, step))
        started, lost_on = time.time(), []
        episode_env = env(question)
        while True:
            options = dict(solve_options)
            if solve_options.get("method") in REFLEXION:  # after a lost server, the trials kept so far stay
                options["reflexion"] = _trial_options(question, episode_env, reflexion or {}, log, on_trial)
            if question.task == GAME.name:  # a game's kind chooses its exemplars where the prompt is keyed by kind
                options["kind"] = question.kind
            if "lats" in options:  # the question's gold answer, which the em evaluator rewards a finish by
                options["lats"] = options["lats"] | {"gold": question.answer}
            try:
                with _episode(model) as endpoint:  # a fleet keeps the episode on one server
                    outcome = solve(
                        question.question,
                        episode_env,
                        model,
                        prompt,
                        on_step=step_hook,
                        header=question.header,
                        **options,
                    )
                break
            except EpisodeLost as lost:  # its server failed: start over on another, from nothing
                lost_on.append(lost.url or "?")
                if len(lost_on) > MAX_RESTARTS:
                    raise ModelError(
                        f"question {question.id} lost its server {len(lost_on)} times; last: {lost}"
                    ) from None
        if outcome.trials is not None:
            outcome.reflexion = {k: v for k, v in (reflexion or {}).items() if k in REFLEXION_RECORDED}
        return Result(question, outcome, started, time.time(), endpoint, tuple(lost_on))

    return answer


# The Reflexion settings each record repeats, so that a record read alone says how its trials were judged.
REFLEXION_RECORDED = ("strategy", "evaluator", "trials", "context")


def _trial_options(question: Question, env: PassageEnv, settings: dict, log: TrialLog | None, on_trial=None) -> dict:
    """The keyword arguments of `reflexion.trials` for one question: the run's Reflexion settings, its gold
    answer and context, the trials a resumed run kept of it, and who is told of each trial (the log, and
    `on_trial(question, trial)`: when a trial ends, and again when its reflection is written)."""
    options = {k: v for k, v in settings.items() if k != "context"}  # run_questions checked the question first
    context = ""
    if settings.get("context") == "gold":
        context = gold_context(_gold_paragraphs(question, env))
    options |= {"gold": question.answer, "context": context}
    if log is not None:
        options["done"] = log.done(question.id)
    if log is not None or on_trial is not None:

        def told(trial: Trial) -> None:
            if log is not None:
                log.add(question.id, trial)
            if on_trial is not None:
                on_trial(question, trial)

        options["on_trial"] = told
    return options


def unrunnable(questions: list[Question], evaluator: str, context: str) -> str | None:
    """Why Reflexion's trials cannot run some of `questions`, or None: with the em evaluator, a question without
    a gold answer to judge a trial by; with CoT's gold context, one without supporting paragraphs. A run checks
    every question before it starts, since one found mid-run would stop it after hours of work."""
    needs = []
    if evaluator == "em":
        needs.append((lambda q: bool(q.answer), "no gold answer, which the em evaluator needs to judge a trial",
                      "give the answers in the data (or --answer), or use --evaluator supported"))  # fmt: skip
    if context == "gold":
        needs.append((lambda q: bool(q.supporting), "no supporting paragraphs, which --context gold gives CoT",
                      "use HotpotQA data with supporting_facts, or --context none"))  # fmt: skip
    for has, lacks, then in needs:
        bad = [q.id for q in questions if not has(q)]
        if bad:
            named = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            which = f"question {named} has" if len(bad) == 1 else f"{len(bad)} of {len(questions)} questions have"
            return f"{which} {lacks}{'' if len(bad) == 1 else f' ({named})'}; {then}"
    return None


def _gold_paragraphs(question: Question, env: PassageEnv) -> list[str]:
    """The question's supporting paragraphs (CoT (GT)'s context), each its sentences joined (`unrunnable`
    has refused a question that names none)."""
    paragraphs = []
    for title in question.supporting:
        sentences = env.pages.sentences(title)
        if sentences is None:
            raise DataError(f"question {question.id}: its supporting title {title!r} is not among its passages")
        paragraphs.append(" ".join(sentences))
    return paragraphs


# How many times an episode may start over on another server before the run stops.
MAX_RESTARTS = 8


def _episode(model: Model):
    """The model's episode context (a fleet's: one server for all the calls), or one that yields None."""
    episode = getattr(model, "episode", None)
    return nullcontext() if episode is None else episode()


def _written(results: Iterator[Result], sink: RunFile | None, log: TrialLog | None = None) -> Iterator[Result]:
    """Append each result to the run file before yielding it; close the file at the end, however the run
    ended, after writing where its questions ran to the manifest (`placement_counts`). A Reflexion run's
    trials under way (`log`) are closed with it."""
    try:
        for result in results:
            if sink is not None:
                sink.append(result.to_dict())
            yield result
    finally:
        results.close()
        if log is not None:
            log.close(set(sink.done) if sink is not None else set())
        if sink is not None:
            for key, counts in placement_counts(sink.done.values()).items():
                sink.set_counts(key, counts)
            sink.close()


def _sequential(questions: Iterator[Question], answer, stop) -> Iterator[Result]:
    for question in questions:
        if stop is not None and stop():
            return
        yield answer(question)


# With this many worker threads or more, the interpreter hands the GIL from thread to thread every
# SWITCH_INTERVAL seconds instead of Python's 5 ms, for the run's duration. With a thousand threads each
# waking to a reply, the forced hand-overs every 5 ms cost more than the work (benchmarks/scale.py: 1,024
# workers against 1 s calls reached 5-11% of the ideal rate at 17-34 ms of CPU per call, and 89% at
# 0.74 ms with 50 ms); a thread waiting on a socket gives the GIL up anyway.
MANY_THREADS = 128
SWITCH_INTERVAL = 0.05


def _parallel(questions: Iterator[Question], answer, stop, workers: int) -> Iterator[Result]:
    """`workers` threads take questions in turn; results come back in the order they finish.

    The threads are daemons, so a second Ctrl-C ends the process at once instead of waiting for
    the questions under way. An error in one question stops new ones from starting; the ones
    under way still finish and are yielded (so written) before the error is raised.
    """
    take, finished, halt = threading.Lock(), queue.SimpleQueue(), threading.Event()

    def work(index: int) -> None:
        WORKER.set(index)
        try:
            while not halt.is_set() and not (stop is not None and stop()):
                with take:
                    question = next(questions, None)
                if question is None:
                    break
                finished.put(answer(question))
        except BaseException as error:  # handed to the consumer, which raises it
            halt.set()
            finished.put(error)
        finally:
            finished.put(None)

    switch = sys.getswitchinterval()
    if workers >= MANY_THREADS:  # see MANY_THREADS
        sys.setswitchinterval(max(switch, SWITCH_INTERVAL))
    for index in range(workers):
        threading.Thread(target=work, args=(index,), daemon=True, name=f"rawreact-worker-{index}").start()
    live, failure = workers, None
    try:
        while live:
            try:
                item = finished.get(timeout=0.2)  # a timeout keeps the wait interruptible by signals
            except queue.Empty:
                continue
            if item is None:
                live -= 1
            elif isinstance(item, BaseException):
                failure = failure or item
            else:
                yield item
        if failure is not None:
            raise failure
    finally:
        halt.set()
        sys.setswitchinterval(switch)
