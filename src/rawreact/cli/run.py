"""`rawreact run`: load everything a run names, then run its questions (the lines it prints are in `lines`)."""

import argparse
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from rawreact import __version__
from rawreact.agents.record import Step, program_text
from rawreact.agents.reflexion import Trial
from rawreact.cli.given import plan_command
from rawreact.cli.lines import (
    game_loop_said,
    loop_said,
    passages_said,
    program_said,
    protocol_said,
    reasoning_text,
    result_line,
    sampling_said,
    say_cache,
    say_first,
    verbs_said,
)
from rawreact.cli.terminal import Stopper, progress
from rawreact.config.choices import REFLEXION
from rawreact.core.tasks import task_type
from rawreact.core.text import inline, plural, printable
from rawreact.models import cores
from rawreact.models.cache import CachedModel
from rawreact.models.specs import EMBEDDED_MODELS
from rawreact.reports.summary import context_warning, summarize, summary_line
from rawreact.runs.cluster import Cluster, ray_questions
from rawreact.runs.plan import RunPlan, grammar_refusal
from rawreact.runs.run import run_questions
from rawreact.runs.setup import model_facts
from rawreact.tasks.collection import Question


def run(args: argparse.Namespace) -> int:
    """`rawreact run`: load everything first, so bad input fails before any model time is spent."""
    with ExitStack() as stack:  # a Ray cluster's actors, killed however the run ends
        return _run(args, stack)


def _run(args: argparse.Namespace, stack: ExitStack) -> int:
    plan = plan_command(args, say=lambda lines: print("\n".join(lines), flush=True))
    settings, collection, questions, parts = plan.settings, plan.collection, list(plan.questions), plan.parts
    out = None if plan.out is None else str(plan.out)  # the run file, chosen by the plan where --out gave none
    embedded = plan.embedded
    if settings.ray is not None:
        model, cluster = None, stack.enter_context(_cluster(args, plan))
        facts = cluster.facts
        if plan.grammar is not None and not facts["supports_grammar"]:
            raise grammar_refusal(facts["details"]["model_name"])
    else:
        model, cluster = _load(args, plan), None
        facts = model_facts(model, embedded)
    model, sink = plan.open(model, facts, ray=None if cluster is None else cluster.described())
    ids = {q.id for q in questions}
    done = [] if sink is None else [r for r in sink.done.values() if r["id"] in ids]
    if sink is not None and sink.other_source:
        print(f"rawreact: note: {sink.other_source}", file=sys.stderr, flush=True)
    task = plan.task
    loop = game_loop_said(settings, task.name) if task.style == "commands" else loop_said(settings)
    if task.writes_programs:
        loop = program_said(parts.config)
    print(
        f"rawreact {__version__}: {plural(len(questions), task.unit)} from {collection.name}, model "
        f"{facts['details']['model_name']}{_on_ray(cluster)}, "
        f"method {settings.method}{'' if task.writes_programs else sampling_said(settings)}{loop}, prompt "
        f"{plan.prompt.source}"
        + ("" if plan.prompt.exemplars is None else f" ({plural(plan.prompt.exemplars, 'exemplar')})")
        + f", grammar {parts.config['grammar'] or 'off'}"
        f"{passages_said(settings)}" + verbs_said(parts.config) + (f"; {len(done)} already in {out}" if done else ""),
        flush=True,
    )
    if task.writes_programs and collection.name.lower().startswith("humaneval"):
        said = protocol_said(parts.config)
        if said:
            print(f"rawreact: note: {said}", file=sys.stderr, flush=True)
    in_flight = settings.workers * (1 if cluster is None else len(cluster.slots))
    with Stopper(in_flight) as stopper, progress(len(questions), len(done)) as bar:

        def say(text: str) -> None:
            bar.write(printable(text.rstrip("\n")), file=sys.stdout)

        trial_of: dict[str, int] = {}  # a Reflexion question's trial under way, by id

        def print_trial(question: Question, trial: Trial) -> None:
            """A trial's end, then (called again) its reflection: the live output's marks between trials."""
            if trial.reflection is None:
                verdict = "passed" if trial.passed else "failed"
                say(f"trial {trial.n} of {inline(question.id)}: {verdict} ({settings.evaluator}), answer "
                    f"{trial.answer!r}, ended by {trial.ended}")  # fmt: skip
                trial_of[question.id] = trial.n + 1
            elif trial.reflection.text:
                say(f"reflection on trial {trial.n} of {inline(question.id)}: {trial.reflection.text}")

        def print_step(question: Question, step: Step) -> None:
            if task_type(question.task).style == "commands":  # a game's lines: `> command`, then what it said
                text = f"> {step.action_text}\n{step.observation}{step.note}\n"
            elif task_type(question.task).writes_programs:  # an implementation and what its tests said
                text = program_text(step)
            elif step.action_text or step.observation:
                text = step.render()
            else:
                text = f"Message {step.i}: {step.thought}\n"
            # A resumed run may hold trials of this question already: its number is known once a trial ends.
            number = trial_of.get(question.id, None if args.resume else 1)
            trial = f" (trial {number})" if settings.method in REFLEXION and number else ""
            head = f"\n=== {inline(question.id)}{trial}\n{question.header}: {question.question}\n"
            say((head if step.i == 1 else "") + text)

        live = not args.quiet and settings.workers == 1 and cluster is None  # else a transcript prints when done
        if cluster is not None:
            results = ray_questions(questions, cluster, out=sink, stop=lambda: stopper.signal is not None)
        else:
            results = run_questions(
                questions,
                plan.envs(),
                model,
                plan.prompt,
                out=sink,
                on_step=print_step if live else None,
                on_trial=print_trial if live and settings.method in REFLEXION else None,
                workers=settings.workers,
                stop=lambda: stopper.signal is not None,
                **plan.options,
            )
        records = list(done)
        first, started = True, (time.perf_counter(), cores.sample())  # the first question's wall time and load
        scored = [r for r in done if r["em"] is not None]  # running sums for the bar, over the scored questions
        n, em, f1 = len(scored), sum(r["em"] for r in scored), sum(r["f1"] for r in scored)
        for result in results:
            if not args.quiet and not live:
                for step in result.outcome.steps:
                    print_step(result.question, step)
            if not args.quiet and result.outcome.reasoning is not None:
                say(reasoning_text(result.question, result.outcome.reasoning))
            records.append(result.to_dict())
            say(result_line(len(records), len(questions), result))
            if first:  # what the first question cost, and whether the machine was busy while it ran (measured)
                first = False
                fixed = model if embedded and model is not None and getattr(model, "cores", None) is None else None
                say_first(result, started, fixed, args.quiet)
            if result.em is not None:
                n, em, f1 = n + 1, em + result.em, f1 + result.f1
                bar.set_postfix_str(f"EM {em / n:.3f} F1 {f1 / n:.3f}", refresh=False)
            bar.update()
    summary = summarize(records)
    print("\n" + summary_line(summary), flush=True)
    if isinstance(model, CachedModel):
        say_cache(model, sink)
    if plan.kept and records:
        print(
            f"rawreact: the run is kept in {out} (--out chooses the file); look at it with `rawreact show "
            f"{out}` or `rawreact report {out} --html report.html`",
            file=sys.stderr,
        )
    warning = context_warning(summary, n_ctx=settings.n_ctx)
    if warning:
        print(f"rawreact: warning: {warning}", file=sys.stderr)
    if stopper.signal is not None and len(records) < len(questions):
        kept = f"{len(records)} of {plural(len(questions), task.unit)}"  # questions, games, problems
        where = f"; {kept} are in {out}, --resume finishes" if sink else ""
        print(f"rawreact: stopped early{where}", file=sys.stderr)
        return 128 + stopper.signal
    return 0


def _load(args: argparse.Namespace, plan: RunPlan):
    """The run's model, loaded and checked by its plan, saying so for the embedded model (whose load can take
    minutes)."""
    settings = plan.settings
    # The first load and the first prompt take seconds to minutes on a slow machine: say what is loading (a spec
    # that names no model is refused by the load, in one line, with nothing before it).
    known = settings.model in EMBEDDED_MODELS or settings.model.startswith("hf:") or Path(settings.model).is_file()
    said = plan.embedded and known and not args.quiet
    if said:
        print(f"rawreact: loading {settings.model} ...", file=sys.stderr, flush=True)
    loading = time.perf_counter()
    model = plan.load_model()
    if said:
        print(f"rawreact: loaded {model.name} in {time.perf_counter() - loading:.1f} s", file=sys.stderr, flush=True)
    return model


def _cluster(args: argparse.Namespace, plan: RunPlan) -> Cluster:
    """The run's Ray actors, started (each loads the model and checks the prompt fits it) before any question."""
    settings = plan.settings
    if not args.quiet:
        where = "a Ray started for the run" if settings.ray == "local" else f"the Ray cluster at {settings.ray}"
        print(f"rawreact: starting the actors on {where} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    cluster = Cluster(settings, plan)
    if not args.quiet:
        nodes = len({slot.node for slot in cluster.slots})
        print(
            f"rawreact: {plural(len(cluster.slots), 'actor')} on {plural(nodes, 'node')} loaded "
            f"{cluster.facts['details']['model_name']} in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return cluster


def _on_ray(cluster: Cluster | None) -> str:
    return "" if cluster is None else f" on {plural(len(cluster.slots), 'Ray actor')}"
