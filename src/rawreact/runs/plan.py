"""A run, resolved and checked in one pass: from the command line, a settings file or a manifest (`choose`), or
from `Settings` given in Python (`make_plan`), to a `RunPlan` that holds its settings, questions, prompts, grammar,
passages' environments, outputs, resume state and where it runs. Every refusal of a run is raised while its plan is
made, before a model, a JVM, a Ray or a server starts; `rawreact run`, `compare`, Ray's actors and the Python API
run plans (`tests/test_plan.py` shows each refusal's place with stand-ins that fail if anything starts).

One room: its parts are one pass: the options a user typed are read once, in order (outputs,
settings, data, the paper's setup, the environment's code, inputs, parts, questions, model, resume), and the
plan they make is the only thing a run reads its settings through; split, each part would reach back for the
others' results.
"""

import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rawreact.config import paper
from rawreact.config.choices import LATS, REFLEXION
from rawreact.config.files import is_manifest, manifest_settings, read_settings, recorded_env
from rawreact.config.settings import PATHS, Settings, in_shard
from rawreact.core.errors import DataError, EnvironmentSetupError, GrammarError
from rawreact.core.folders import check_parents, split_named
from rawreact.core.modules import module_problem, read_module
from rawreact.core.tasks import SCIENCEWORLD, TaskType, task_type
from rawreact.core.text import plural
from rawreact.environments.custom import check_recorded
from rawreact.models import check_spec, load_model
from rawreact.models.cache import CachedModel, CallCache
from rawreact.models.cores import threads_problem
from rawreact.models.specs import is_embedded
from rawreact.runs.records import manifest_path
from rawreact.runs.run import check_context, run_questions
from rawreact.runs.runfile import RunFile, refuse_resume, refuse_start
from rawreact.runs.setup import (
    Parts,
    check_questions,
    envs_of,
    game_problem,
    load_parts,
    model_facts,
    model_options,
)
from rawreact.tasks.collection import Collection, Question, choose_questions
from rawreact.tasks.games import undescribed
from rawreact.tasks.loading import load_collection
from rawreact.tasks.scienceworld import is_scienceworld
from rawreact.tasks.scienceworld import parse as parse_scienceworld

RUNS = "runs"  # where a run without --out is kept, under the current folder (RAWREACT_RUNS: elsewhere)


@dataclass(frozen=True)
class Command:
    """What a command line asked for, made once by the command line (`cli.given.command_of`): the settings it typed
    (a flag left out is absent), its settings file (`--config`), the checkout `--reference` names, and its run file
    (`--out`, `--resume`). Nothing under `runs/` reads the command line itself."""

    typed: dict
    config: str | None = None
    reference: str | None = None
    out: str | None = None
    resume: bool = False


@dataclass
class Chosen:
    """A run's settings, its questions, and what `--reference` chose (None without it)."""

    settings: Settings
    collection: Collection
    questions: list[Question]
    paper: dict | None = None


def given_settings(command: Command) -> dict:
    """The settings a command was given: its `--config` file's, with the flags typed beside it over them.

    Code is imported only where the user named it (`environments.custom`): the `env` of a run's manifest (a
    file runs are shared in) only when the command line names the same module with `--env`, and only if its
    source is the one the run recorded; a TOML file's `env` is named in a line before it is imported."""
    config = command.config
    from_file = read_settings(config) if config else {}
    typed = dict(command.typed)
    if from_file.get("env") is not None:
        _check_env_of(config, from_file["env"], typed.get("env"))
    if from_file.get("ray") not in (None, "local") and typed.get("ray") is None and is_manifest(config):
        address = from_file["ray"]  # joining sends the cluster the plan and unpickles what its workers send back
        raise DataError(
            f"{config} ran on the Ray cluster at {address}; a cluster a run's manifest names is joined only "
            f"when the command line names it too: add --ray-address {address}, or --ray to start a Ray of this "
            "run's own, or leave both out to run here"
        )
    return from_file | typed


def _check_env_of(config: str, spec: str, typed: str | None) -> None:
    """Refuse, before any import, a manifest's `--env` the command line does not name, or whose source changed;
    say which module a TOML file's `env` imports."""
    try:
        where = read_module(spec)
    except ValueError as error:
        raise DataError(f"{config}: {error}") from None
    located = where.locate()
    file = str(located) if located else f"no file found for {where.module}"
    recorded = recorded_env(config)
    if recorded is None:  # a TOML settings file: the user wrote it, and is told what it runs
        if typed is None:
            print(f"rawreact: {config} names env {spec}: importing {where.module} from {file}", file=sys.stderr)
        return
    if typed is None:
        raise EnvironmentSetupError(
            f"{config} was run with --env {spec} ({file}); code a run's manifest names is imported only when "
            f"the command line names it too: read that file, then add --env {where.named}"
        )
    if module_problem(typed) is None and read_module(typed).named == where.named:  # (a bad one: Settings says)
        check_recorded(typed, recorded[1], config, recorded[2])


def choose(command: Command) -> Chosen:
    """The settings of `rawreact run`, and its questions, checked before any model loads."""
    given = given_settings(command)
    data = given.get("data")
    if data is not None and given.get("question") is None and not command.reference and is_scienceworld(str(data)):
        _check_game(given, SCIENCEWORLD.name, command.config)  # before its simulator's JVM starts to list the episodes
    collection = _collection(given)
    _judged_by_the_game(given, collection.task)
    options = {}
    if command.reference:
        method = given.get("method", "react")
        count = 1 if given.get("question") is not None else len(collection.questions)
        options = paper.reference_options(command.reference, collection.task, method, count)
    settings = _settings({k: v for k, v in options.items() if k not in given} | given, command.config)
    questions = _chosen(settings, collection)
    info = None
    if command.reference:
        yours = {k: v for k, v in given.items() if k in options}
        info = {"options": options, "given": yours, "task": collection.task, "directory": command.reference}
    return Chosen(settings, collection, questions, info)


def _judged_by_the_game(given: dict, task: str) -> None:
    if task_type(task).scoring == "outcome" and given.get("method") in REFLEXION and "evaluator" not in given:
        given["evaluator"] = "won"  # a trial of a game is judged by the game


def _settings(given: dict, config: str | None) -> Settings:
    try:
        return Settings(**given)
    except DataError as error:  # settings that do not go together: say which file gave them
        raise DataError(f"{config}: {error}" if config else str(error)) from None


def _check_game(given: dict, task: str, config: str | None) -> None:
    """The refusals of a game's run that its settings alone decide (as `choose` and `load_parts` make them), for
    games whose reading starts a simulator: the settings do not go together, or cannot play these games."""
    parse_scienceworld(str(given["data"]))  # a spelling that names no episodes
    early = dict(given)
    _judged_by_the_game(early, task)
    settings = _settings(early, config)
    problem = game_problem(settings, task) or threads_problem(settings.threads)
    if problem:
        raise DataError(f"{settings.where}{problem}")


def _collection(given: dict) -> Collection:
    """The data's questions, or for `--question` the passages it is asked over: those of --passages (see
    runs.setup.collection_of), else the demo's."""
    if given.get("question") is not None:
        return Collection("--question", {}, ()) if given.get("passages") else load_collection().pooled()
    questions_only = given.get("env") is not None or given.get("passages") is not None  # the run brings the passages
    return load_collection(given.get("data"), questions_only=questions_only)


def _chosen(settings: Settings, collection: Collection) -> list[Question]:
    """The questions a run asks: `--question`, or the data's, limited and shuffled as the settings say."""
    if settings.question is not None:
        return [Question("question-1", settings.question, settings.answer)]
    chosen = choose_questions(
        collection,
        limit=settings.limit,
        shuffle=settings.shuffle,
        seed=settings.shuffle_seed,
        shuffle_range=settings.shuffle_range,
    )
    return in_shard(chosen, settings.shard_of)


def say_paper(chosen: Chosen) -> list[str]:
    """What of this run's setup is the paper's and what is not, part by part, as lines to print."""
    settings, info = chosen.settings, chosen.paper
    task = task_type(chosen.collection.task)
    store = f"the store {settings.passages}" if settings.passages else None
    own = "each question's own paragraphs (the distractor setting)" if task.own_passages else "none"
    parts = {
        "task": info["task"],
        "method": settings.method,
        "n_first": settings.n_first,
        "max_steps": settings.max_steps,
        "questions": len(chosen.collection.questions),
        "passages": store or own,
        "model": settings.model,
    }
    if chosen.collection.game_rows:
        parts["games"] = paper.GAMES["rows"]
    elif undescribed(chosen.collection):
        parts["games"] = paper.GAMES["undescribed"]
    lines = paper.describe(info["options"], info["given"], parts)
    whose = "LATS's" if chosen.settings.method == LATS else "Reflexion's" if task.writes_programs else "the paper's"
    head = f"rawreact: {whose} setup from {info['directory']} (--reference), "
    return [head + f"{plural(len(chosen.questions), task.unit)}:", *lines]


def reference_record(chosen: Chosen) -> dict:
    """What the manifest keeps of --reference: the checkout, its files' hashes, the parts chosen and given."""
    info = chosen.paper
    return {
        "directory": str(info["directory"]),
        "files": paper.files(info["directory"], info["task"], chosen.settings.method),
        "paper": {k: v for k, v in info["options"].items() if k not in info["given"]},
        "yours": info["given"],
    }


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (through links, or the same path spelled two ways)."""
    try:
        return Path(a).resolve() == Path(b).resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def refuse_inputs(out: str | Path, inputs: list[str | Path], what: str) -> None:
    """Refuse an output path that is one of the inputs a command reads (or inside an input folder)."""
    for source in inputs:
        if same_file(out, source):
            raise DataError(f"{out} is {what} this command reads; writing there would destroy it: choose another path")
        if Path(source).is_dir() and Path(out).resolve().is_relative_to(Path(source).resolve()):
            raise DataError(f"{out} is inside {source}, a folder this command reads; choose a path outside it")


def refuse_cache_inputs(settings: dict, config: str | None = None) -> None:
    """Refuse a `--cache` that is one of the files the settings (by key) read: their data, passages, prompts,
    model, or the settings file itself; the cache would add its table to it."""
    cache = settings.get("cache")
    if not cache:
        return
    named = [settings[key] for key in PATHS if key != "cache" and isinstance(settings.get(key), str)]
    model = settings.get("model") or ""
    inputs = [split_named(name)[0] for name in named if name] + [model.removeprefix("scripted:")] * bool(model)
    refuse_inputs(cache, inputs + ([config] if config else []), "an input (--cache would add a table to it)")


def kept_path(settings: Settings, data: str) -> Path:
    """Where a run without --out is kept: `runs/DATA-METHOD-MODEL-YYYYMMDD-HHMMSS.jsonl`, a name that says
    what ran and when (`-2`, `-3` after it when another run took that second)."""
    folder = Path(os.environ.get("RAWREACT_RUNS") or RUNS)
    model = Path(settings.model.split(":", 1)[-1]).stem if ":" in settings.model else settings.model
    parts = [Path(data).stem or "questions", settings.method, model, time.strftime("%Y%m%d-%H%M%S")]
    name = "-".join(re.sub(r"[^A-Za-z0-9._-]+", "_", part).strip("_")[:40] or "x" for part in parts)
    path, n = folder / f"{name}.jsonl", 1
    while path.exists() or manifest_path(path).exists():
        n += 1
        path = folder / f"{name}-{n}.jsonl"
    return path


def grammar_refusal(model: str, where: str = "") -> GrammarError:
    """The refusal of a grammar by a model that cannot apply one (`where`: a comparison's variant, which names it)."""
    todo = "" if where else "; drop --grammar, or use a llama.cpp model"
    return GrammarError(f"{where}model {model} cannot apply a grammar{todo}")


def grammar_refused(spec: str) -> bool:
    """Whether the model a spec names cannot apply a grammar, known before it loads: Ollama's (a server's
    family is known once it answers, and `RunPlan.load_model` checks it then)."""
    return spec.split(":", 1)[0] == "ollama"


@dataclass(frozen=True)
class RunPlan:
    """A run resolved and checked: what it asks (settings, questions over their collection), with what (the
    parts its settings name: prompt, back-off prompt, grammar, manifest config), where it writes (`out`, kept
    when the command gave none, `resume`), the paper's setup it follows (`paper`) and the call cache it reads.

    Ray's actors are sent the plan (without its cache's open file): `settings`, `collection`, `prompt`, `options`
    and `questions` are what an actor makes its part of the run from (`runs.cluster`)."""

    settings: Settings
    collection: Collection
    questions: tuple[Question, ...]
    parts: Parts
    out: Path | None = None
    resume: bool = False
    kept: bool = False
    paper: dict | None = None
    calls: CallCache | None = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "calls": None}  # an open SQLite file stays with the process that opened it

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    @property
    def prompt(self):
        """The prompt the run sends (a back-off's first part's)."""
        return self.parts.prompt

    @property
    def grammar(self):
        """The grammar the run applies, or None."""
        return self.parts.grammar

    @property
    def backoff(self):
        """A back-off's second prompt, or None."""
        return self.parts.backoff

    @property
    def task(self) -> TaskType:
        """The task type of the run's questions."""
        return task_type(self.collection.task)

    @property
    def embedded(self) -> bool:
        """Whether the model runs in this process (llama.cpp), not on a server."""
        return is_embedded(self.settings.model)

    @property
    def options(self) -> dict:
        """The keyword arguments of `solve` (and `run_questions`) for this plan: made once, with its parts, so that
        the run sends the prompts its manifest hashed (and Ray's actors get them in the plan, reading no file)."""
        return self.parts.options

    def envs(self):
        """The environment of each question (`runs.setup.envs_of`)."""
        return envs_of(self.settings, self.collection)

    def load_model(self, **options):
        """The plan's model, loaded with the settings' options (`options` over them), and checked: it can apply
        the plan's grammar, and the longest question's prompt fits its context."""
        settings = self.settings
        model = load_model(settings.model, **(model_options(settings) | options))
        if self.grammar is not None and not model.supports_grammar:
            raise grammar_refusal(model.name)
        check_context(model, self.prompt, self.questions, settings.step_tokens, settings.method, self.backoff)
        return model

    def run(self, model=None, *, on_step=None, stop=None):
        """Run the plan as `rawreact run` does: on `model` (by default the plan's, loaded and checked), through the
        call cache, into the run file with its manifest (when the plan has one); yields each `Result` as it is done
        (`run_questions`, whose `on_step` and `stop` these are)."""
        model = self.load_model() if model is None else model
        model, sink = self.open(model, model_facts(model, self.embedded))
        return run_questions(list(self.questions), self.envs(), model, self.prompt, out=sink, on_step=on_step,
                             workers=self.settings.workers, stop=stop, **self.options)  # fmt: skip

    def open(self, model, facts: dict, ray: dict | None = None):
        """The loaded `model` behind the plan's call cache (None stays None: a Ray run's actors hold the models), and
        the run file opened with its manifest (`facts`: `model_facts`'; `ray`: where a Ray run ran), or None."""
        if model is not None and self.calls is not None:  # calls made before come from the cache's file
            model = CachedModel(model, self.calls, sampled=self.settings.cache_sampled)
        if self.out is None:
            return model, None
        details = self.details(facts) | ({} if ray is None else {"ray": ray})
        return model, RunFile(self.out, self.parts.config | facts["served"], resume=self.resume, details=details)

    def details(self, facts: dict) -> dict:
        """What the manifest records beside the config, not compared by a resume: where the questions came from,
        how many, the model's facts (`runs.setup.model_facts`), and the settings as given."""
        settings, collection = self.settings, self.collection
        return {
            **({} if self.paper is None else {"reference": reference_record(self)}),
            "data": collection.source,
            "layout": collection.layout,
            "limit": settings.limit,
            "questions": len(self.questions),
            **facts["details"],
            "workers": settings.workers,
            "timeout": settings.timeout,
            "settings": manifest_settings(settings),
        }


def check_outputs(out: str | None, resume: bool, config: str | None) -> None:
    """The refusals of a run's output path that need nothing but the command line."""
    if resume and not out:
        raise DataError("--resume continues the run file given with --out; add --out RUN.jsonl")
    if out and Path(out).is_dir():
        raise DataError(f"{out} is a folder; give --out a file name, such as {Path(out) / 'run.jsonl'}")
    if out:
        check_parents(out)  # before any model time; the folders themselves are made with the run file
    if out and config:
        for path in (out, manifest_path(out)):
            refuse_inputs(path, [config], "the settings file")


def make_plan(
    settings: Settings,
    collection: Collection,
    questions: list[Question] | None = None,
    *,
    out: str | Path | None = None,
    resume: bool = False,
    keep: bool = False,
    config: str | None = None,
    paper: dict | None = None,
    run: dict | None = None,
    say=None,
) -> RunPlan:
    """The checked plan of a run of `settings` on `questions` (by default the collection's, chosen as the settings
    say: `question`, `limit`, `shuffle`, `shard`): every refusal is
    raised here, before anything loads. `out` is the run file (with `keep`, a run without one is kept under
    `runs/`), `resume` continues it, `config` is the settings file the settings came from, `paper` what
    `--reference` chose, `run` how the questions were chosen when not by these settings (`compare`'s);
    `say(lines)` is given the paper's setup as it is checked."""
    out = None if out is None else str(out)
    check_outputs(out, resume, config)
    if questions is None:  # the collection's, limited, shuffled and sharded as the settings say
        questions = _chosen(settings, collection)
    if resume and settings.env:  # the code that made the run, or none: checked before it is imported
        recorded = recorded_env(manifest_path(out))
        if recorded is not None:
            check_recorded(settings.env, recorded[1], manifest_path(out).name, recorded[2])
    kept = keep and not out  # every run is kept: without --out, in the runs folder under a name that says what it is
    if kept:
        out = str(kept_path(settings, collection.name))
        check_parents(out)
    if out:  # the run file and its manifest must not be a file the run reads
        inputs = [split_named(getattr(settings, key))[0] for key in PATHS if getattr(settings, key)]
        for path in (out, manifest_path(out)):
            refuse_inputs(path, [*inputs, settings.model], "an input")
    refuse_cache_inputs(settings.to_dict(), config)
    if paper is not None and say is not None:
        say(say_paper(Chosen(settings, collection, questions, paper)))
    if run is None:  # how the questions were chosen, for the manifest's config
        run = {k: getattr(settings, k) for k in ("question", "shuffle", "shuffle_seed", "shuffle_range", "shard")}
    parts = load_parts(settings, collection, **run)
    check_questions(settings, questions)
    check_spec(settings.model)  # a model no load could find: refused as the load would, before it
    if parts.grammar is not None and grammar_refused(settings.model):  # as the load would say (a variant's: compare)
        raise grammar_refusal(settings.model, settings.where)
    if out:  # the run file: a run there already, or one whose manifest says other settings
        refuse_start(Path(out), resume)
        if resume and Path(out).is_file() and Path(out).stat().st_size > 0:
            refuse_resume(Path(out), parts.config)
    # a bad cache file fails before the model loads; a Ray run's actors each answer from the model
    calls = CallCache(settings.cache) if settings.cache and settings.ray is None else None
    return RunPlan(settings, collection, tuple(questions), parts, None if out is None else Path(out), resume, kept,
                   paper, calls)  # fmt: skip


def plan_of(command: Command, say=None) -> RunPlan:
    """The plan of `rawreact run`'s command line, made into a `Command` (see `make_plan`)."""
    check_outputs(command.out, command.resume, command.config)
    chosen = choose(command)
    return make_plan(chosen.settings, chosen.collection, chosen.questions, out=command.out, resume=command.resume,
                     keep=True, config=command.config, paper=chosen.paper, say=say)  # fmt: skip
