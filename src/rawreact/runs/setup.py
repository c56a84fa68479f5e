"""From settings to the parts of a run: the prompt, the back-off's prompt, the grammar, the passages,
each question's environment, the keyword arguments of `solve`, and the manifest's config.

`rawreact run` and `compare` (whose `Variant` is a `Settings` value with a name) both use these
functions, so a run and a comparison's variant with the same settings are the same run.
A run plan (`plan.py`) calls them once, in order, before anything loads.

One room: each function reads one part of the same settings (prompt, grammar, passages, environment, manifest
config), and the manifest's config is made from all of them; a reader who follows a setting finds every use of it
here.
"""

import functools
import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rawreact.agents.commands import CommandGrammar, load_commands_grammar
from rawreact.agents.grammar import Grammar, load_grammar, validate
from rawreact.agents.lats_prompts import LatsPromptFiles
from rawreact.agents.programs import MAX_TESTS as MAX_OWN_TESTS
from rawreact.agents.programs import NAMES as PROGRAM_PROMPTS
from rawreact.agents.programs import ProgramPrompts
from rawreact.agents.programs_reference import DEFAULTS as REFERENCE_DEFAULTS
from rawreact.agents.programs_reference import ProgramReference, reference_source
from rawreact.agents.prompts import Prompt, exemplar_verbs, read_text
from rawreact.agents.prompts import load_prompt as _load_prompt
from rawreact.agents.reflexion import ReflectPrompt, load_reflect_prompt
from rawreact.agents.reflexion_games import check as check_code_reflection
from rawreact.config.choices import (
    BACKOFFS,
    CALL_STOPS,
    LATS,
    PROGRAM_ITERATIONS,
    PROGRAM_LATS,
    PROGRAM_TOKENS,
    PROGRAMS,
    REFLECTING,
    REFLEXION,
    SAMPLING,
    acts,
    first_method,
    reflexion_loop_problem,
)
from rawreact.config.settings import Settings, defaults, given_or, option
from rawreact.core.errors import DataError, EnvironmentSetupError, GrammarError
from rawreact.core.folders import split_named
from rawreact.core.resources import resource
from rawreact.core.tasks import QA, task_type
from rawreact.environments.box import box
from rawreact.environments.custom import Factory, import_factory
from rawreact.environments.env import bound_verbs
from rawreact.environments.game import commands_unknown
from rawreact.models.cores import bound_spinning, threads_problem
from rawreact.models.specs import model_sha256
from rawreact.runs.run import unrunnable
from rawreact.tasks.collection import Collection, Passages, Question
from rawreact.tasks.games import undescribed
from rawreact.tasks.humaneval import check_canonical
from rawreact.tasks.loading import open_passages


def prompt_of(settings: Settings, task: str = QA.name) -> Prompt:
    """The prompt the settings send (a back-off's first part's) for the task ("qa" or "fever"): the files named, or
    those an `--env` factory declares for ReAct (`Factory.declared_prompt`), or the method's shipped ones. A
    problem of a program's is the exemplars an implementation follows (`program_prompts_of`)."""
    if task_type(task).writes_programs:
        if settings.program_reference is not None:  # the repository's prompts, put together call by call
            source = reference_source(settings.program_reference, chat=settings.prompt == "chat")
            return Prompt(text="", source=source, exemplars=None)  # the file is read once, for the run's options
        prompts = program_prompts_of(settings)
        return Prompt(
            text=prompts.simple, source=f"{prompts.source}simple.txt", exemplars=prompts.simple.count("\ndef ")
        )
    exemplars, instruction = settings.prompt, settings.instruction
    if (
        settings.env is not None
        and exemplars is None
        and instruction is None
        and first_method(settings.method) == "react"
    ):
        exemplars, instruction = factory_of(settings).declared_prompt()
    return _load_prompt(
        exemplars,
        k=settings.k,
        instruction=instruction,
        key=settings.key,
        order=settings.order,
        method="cot-context" if settings.context == "gold" else first_method(settings.method),
        task=task,
    )


def program_prompts_of(settings: Settings) -> ProgramPrompts:
    """The program methods' prompts: a folder of them named by --prompt (or the name of a shipped one: `chat`, for a
    model with Qwen's ChatML template), or rawreact's own for a model that continues a function (prompts/programs/)."""
    shipped = resource("prompts", f"programs/{settings.prompt}") if settings.prompt in SHIPPED_PROGRAM_PROMPTS else None
    if shipped is not None and not Path(settings.prompt).is_dir():
        return ProgramPrompts.load(f"{shipped}/")
    if settings.prompt is not None and not Path(settings.prompt).is_dir():
        raise DataError(
            f"{settings.where}--prompt {settings.prompt}: the program methods take a folder of prompts "
            f"({', '.join(n + '.txt' for n in PROGRAM_PROMPTS)}), as prompts/programs/ is"
        )
    folder = None if settings.prompt is None else settings.prompt.rstrip("/") + "/"
    return ProgramPrompts.load(folder)


SHIPPED_PROGRAM_PROMPTS = ("chat",)  # the folders of program prompts under prompts/programs/, by name


def program_problem(settings: Settings, task: str) -> str | None:
    """What stops these settings from running on the task's problems of programs (or a program method on other
    tasks), or None."""
    if not task_type(task).writes_programs:
        if settings.method in PROGRAMS:
            return f"method {settings.method} writes programs; run it on problems of programs (--data humaneval)"
        if settings.program_reference is not None or settings.number_of_tests is not None:
            return "--program-reference and --number-of-tests are for problems of programs (--data humaneval)"
        return None
    allowed = task_type(task).methods or PROGRAMS
    if settings.method not in allowed:
        return f"a problem of a program is answered by {', '.join(allowed)}, not {settings.method}"
    if settings.loop == "reference" and settings.program_reference is None:
        return (
            "the programs' reference rules send a repository's prompts: give --reference DIR (a clone of Reflexion "
            "or LATS), or drop --loop reference"
        )
    if settings.program_reference is not None and settings.loop != "reference":
        return "--program-reference is the repository's, which its rules send: add --loop reference"
    if settings.program_reference is not None and settings.prompt not in (None, "chat"):
        return (
            "under --reference the repository's prompts are sent; --prompt chat sends its chat messages as ChatML "
            "turns (drop any other --prompt)"
        )
    if settings.number_of_tests is not None and settings.method == "simple":
        return "the simple method writes no tests of its own; drop --number-of-tests"
    if settings.method == LATS:
        others = [option(k) for k in ("lats_values", "lats_depth", "rollout_depth", "lats_prompts", "value_prompt")
                  if getattr(settings, k) != defaults(k)]  # fmt: skip
        if others:
            return (
                f"{', '.join(others)} are LATS's settings over ReAct steps; over programs it takes --iterations, "
                "--lats-samples and --lats-temperature"
            )
    if settings.passages is not None or settings.env is not None:
        return "a problem of a program is judged by its own tests; drop --passages and --env"
    if settings.key is not None or settings.instruction is not None or settings.k is not None:
        return "the program methods take a folder of prompts with --prompt; drop --key, --instruction and -k"
    return None


def program_options(settings: Settings, task: str) -> dict:
    """The program methods' part of `solve`'s keyword arguments: their prompts, their implementations, and the
    token limit of one (PROGRAM_TOKENS where --max-tokens is left out)."""
    if not task_type(task).writes_programs:
        return {}
    tokens = given_or(settings.max_tokens, PROGRAM_TOKENS)
    if settings.program_reference is not None:
        return {"program": reference_program_options(settings), "max_tokens": tokens}
    options = {"prompts": program_prompts_of(settings)}
    if settings.method == "reflexion":
        options["iterations"] = given_or(settings.trials, PROGRAM_ITERATIONS)
    if settings.method == "simple" and settings.samples is not None:  # pass@k: samples a problem, as given
        options |= {"samples": settings.samples, "temperature": settings.sample_temperature, "seed": settings.seed}
    if settings.method == LATS:
        options |= {"iterations": given_or(settings.iterations, PROGRAM_LATS["iterations"]),
                    "temperature": given_or(settings.lats_temperature, PROGRAM_LATS["temperature"]),
                    "children": settings.lats_samples, "seed": settings.seed}  # fmt: skip
    if settings.number_of_tests is not None:
        options["tests"] = settings.number_of_tests
    return {"program": options, "max_tokens": tokens}


def reference_program_options(settings: Settings) -> dict:
    """The reference rules' options (agents.programs_reference): the repository's prompts, in its chat branch
    (--prompt chat) or its completion branch, and its run script's iterations and tests where not given."""
    reference = ProgramReference.load(settings.program_reference, chat=settings.prompt == "chat")
    script = REFERENCE_DEFAULTS[reference.repo]
    if settings.method == "reflexion" and reference.repo != "reflexion" or settings.method == LATS and (
            reference.repo != "lats"):  # fmt: skip
        raise DataError(
            f"{settings.where}--program-reference {settings.program_reference} is {reference.repo}'s, and method "
            f"{settings.method} is {'LATS' if settings.method == LATS else 'Reflexion'}'s: give that repository's"
        )
    options: dict = {"reference": reference, "seed": settings.seed}
    if settings.method == "reflexion":
        options["iterations"] = given_or(settings.trials, script["iterations"])
    if settings.method == LATS:
        options |= {"iterations": given_or(settings.iterations, script["iterations"]),
                    "children": settings.lats_samples}  # fmt: skip
    if settings.method != "simple":
        options["tests"] = settings.number_of_tests or script["tests"]
    return options


def reflect_prompt_of(settings: Settings, task: str = QA.name) -> ReflectPrompt | None:
    """The reflection prompt of a Reflexion method whose strategy writes reflections, or None (a game's
    reflections have their own shipped prompt)."""
    if settings.method not in REFLEXION or settings.strategy not in REFLECTING:
        return None
    return load_reflect_prompt(
        settings.reflect_prompt,
        key=settings.reflect_key,
        instruction=settings.reflect_instruction,
        agent="game" if task_type(task).style == "commands" else REFLEXION[settings.method],
    )


def backoff_prompt_of(settings: Settings, task: str = QA.name) -> Prompt | None:
    """The prompt of a back-off's second part, or None for a method that is not a back-off."""
    if settings.method not in BACKOFFS:
        return None
    second = BACKOFFS[settings.method][1]
    return _load_prompt(
        settings.backoff_prompt,
        key=settings.backoff_key,
        instruction=settings.backoff_instruction,
        method=second,
        task=task,
    )


def grammar_of(settings: Settings) -> Grammar | CommandGrammar | None:
    """The grammar the settings apply, or None."""
    if settings.grammar is None and settings.grammar_file is None:
        return None
    if settings.grammar == "commands":
        return load_commands_grammar(settings.grammar_file)
    return load_grammar(settings.grammar or "step", settings.grammar_file)


def game_problem(settings: Settings, task: str) -> str | None:
    """What stops these settings from running on the task's questions, games or not, or None."""
    if task_type(task).style != "commands":
        if settings.method in REFLEXION and settings.loop == "reference":  # a game's: the Reflexion code's loop
            return reflexion_loop_problem(settings.method)
        if settings.env is not None and settings.loop == "reference":  # a game's reference loop sends any line
            return "the reference loop answers the notebook's four verbs only; run --env in the tolerant loop"
        if settings.grammar == "commands":
            return "--grammar commands is a game's (its admissible commands); questions take step, action or titles"
        if settings.evaluator == "won":
            return "--evaluator won judges a game's trial; a question's take em or supported"
        return None
    if settings.method not in ("react", "act", "react-reflexion"):
        return (
            f"games are played by react or act (the paper's ALFWorld rows) or react-reflexion (the Reflexion "
            f"paper's), not {settings.method}"
        )
    if settings.method == "react-reflexion" and settings.evaluator != "won":
        return f"a game's trial is judged by the game: --evaluator won, not {settings.evaluator}"
    if settings.grammar not in (None, "commands"):
        return f"a game's grammar is its admissible commands: --grammar commands, not {settings.grammar}"
    if settings.loop == "reference" and settings.method == "react-reflexion" and settings.strategy != "reflexion":
        return "the Reflexion code's alfworld_runs (--loop reference) keeps reflections: --strategy reflexion"
    if settings.passages is not None:
        return "a game is its own environment; drop --passages"
    return None


def collection_of(settings: Settings, collection: Collection) -> Collection:
    """The questions over the settings' passages: their own, or those of `passages`."""
    if collection.game_rows and settings.env is None:
        raise DataError(
            f"{collection.source} lists games by row (id and game), which an environment of your own plays: give "
            "--env with the factory that makes each from its row"
        )
    if settings.passages is None:
        refused = task_type(collection.task).refused  # what a task type cannot be run by, in its own words
        if settings.method in REFLEXION and "reflexion" in refused:
            raise DataError(f"{settings.where}{refused['reflexion']}")
        if acts(settings.method) and "acting" in refused:
            raise DataError(f"{settings.where}{refused['acting']}")
        return collection
    passages = shared_passages(settings.passages)
    if settings.grammar == "titles" and passages.kind == "store":
        raise GrammarError(
            f"{settings.where}--grammar titles writes every passage title into the grammar, and the store "
            f"{settings.passages} has {passages.count:,} pages; use --grammar step"
        )
    return collection.over(passages)


def envs_of(settings: Settings, collection: Collection) -> Callable[[Question], object]:
    """The environment of each question under the settings' passages, loop and passage length, made by the
    settings' `--env` factory from that where one is named."""
    collection = collection_of(settings, collection)
    factory = factory_of(settings)
    bound_verbs(settings.verb_timeout if factory is not None else None)  # a user's verb that hangs fails instead

    def env(question: Question) -> object:
        made = collection.env(question, n_first=settings.sentences, loop=settings.loop,
                              unboxed=settings.unboxed_programs)  # fmt: skip
        return made if factory is None else factory(made, None if question is None else question.row_fields())

    return env


def factory_of(settings: Settings) -> Factory | None:
    """The user's `--env` factory, imported once per process, or None."""
    return None if settings.env is None else _factory(settings.env)


@functools.cache
def _factory(spec: str) -> Factory:
    return import_factory(spec)


def check_env(settings: Settings, collection: Collection, grammar: Grammar | None) -> dict:
    """Make the first question's environment under `--env` before any model loads, so a factory or a verb
    that cannot work fails first; the manifest's record of it (`env`, its source's digest, its verbs)."""
    if settings.env is None:
        return {}
    questions = collection.questions or (None,)
    env = envs_of(settings, collection)(questions[0])
    if grammar is not None and grammar.mode != "commands":
        validate(grammar, env.verbs)
    lacking = sorted(set(exemplar_verbs(prompt_of(settings, collection.task).text)) - {v.name for v in env.verbs})
    if lacking and task_type(collection.task).style != "commands":
        shown = ", ".join(v.title() for v in lacking)
        print(f"rawreact: the prompt's exemplars use {shown}, which the environment of --env {settings.env} has no "
              f"verb for (it has {', '.join(v.shown for v in env.verbs)}); the model will copy them. Give a prompt "
              f"of its verbs with --prompt and --instruction, or declare one on the factory (docs: Your own "
              "environment and verbs)", file=sys.stderr, flush=True)  # fmt: skip
    verbs = [{"name": v.name, "shown": v.shown, "arg": v.arg, "description": v.description} for v in env.verbs]
    factory = factory_of(settings)
    recorded = {"env": settings.env, "env_sha256": factory.sha256, "env_files": factory.files, "verbs": verbs}
    if factory.plugin is not None:  # an installed plugin: which package and version made the environment
        recorded["env_plugin"] = dict(zip(("name", "package", "version"), factory.plugin, strict=True))
    # How long a verb may take decides what an episode whose verb hangs sees: a resume compares it.
    return recorded | {"verb_timeout": settings.verb_timeout}


def solve_options(
    settings: Settings, grammar: Grammar | CommandGrammar | None, backoff: Prompt | None, task: str = QA.name
) -> dict:
    """The keyword arguments of `solve` (through `run_questions`) for these settings, on the task's questions."""
    return (
        {
            "method": settings.method,
            "loop": settings.loop,
            "repeats": settings.repeats,
            "budget": settings.budget,
            "backoff_prompt": backoff,
            "samples": settings.cot_samples,
            "sample_temperature": settings.sample_temperature,
            "seed": settings.seed,
            "max_steps": settings.steps(task),
            "max_tokens": settings.step_tokens,
            "grammar": grammar,
        }
        | _reflexion_options(settings, task)
        | ({} if task_type(task).writes_programs else lats_options(settings))  # LATS over programs: program_options
        | program_options(settings, task)
    )


def lats_options(settings: Settings) -> dict:
    """LATS's part of `solve`'s keyword arguments: its settings, and what its prompts are made of (the
    repository's file under --loop reference; rawreact's value prompt and reflection prompt otherwise)."""
    if settings.method != LATS:
        return {}
    if settings.loop == "reference":  # read once (a template naming a field LATS does not fill: refused now)
        prompts = LatsPromptFiles.read_reference(settings.lats_prompts)
    else:
        value = Path(settings.value_prompt) if settings.value_prompt else resource("prompts", "lats/value.txt")
        prompts = LatsPromptFiles(value=read_text(value), reflect=load_reflect_prompt(agent="react"),
                                  value_source=settings.value_prompt or "prompts/lats/value.txt")  # fmt: skip
    options = {"samples": settings.lats_samples, "values": settings.lats_values,
               "iterations": settings.step_iterations, "depth": settings.lats_depth,
               "rollout_depth": settings.rollout_depth, "temperature": settings.step_lats_temperature,
               "seed": settings.seed}  # fmt: skip
    return {"lats": options | {"prompts": prompts, "evaluator": settings.evaluator}}


def _reflexion_options(settings: Settings, task: str = QA.name) -> dict:
    """A Reflexion method's part of `solve`'s keyword arguments (the rest come per question in run_questions)."""
    if settings.method not in REFLEXION:
        return {}
    keys = ("strategy", "evaluator", "context", "reflect_max_tokens")
    # The agent's exemplars from the Reflexion code's fewshots.py: its checkout was given, so CoT's trials
    # are made as that code makes them (reflexion_code.reference_cot).
    as_code = bool(settings.prompt) and split_named(settings.prompt)[0].endswith(".py")
    options = {k: getattr(settings, k) for k in keys} | {"trials": settings.question_trials}
    options["reflect_prompt"] = reflect_prompt_of(settings, task)
    return {"reflexion": options | {"as_reflexion_code": as_code}}


def manifest_config(
    settings: Settings,
    collection: Collection,
    prompt: Prompt,
    grammar: Grammar | None,
    backoff: Prompt | None = None,
    options: dict | None = None,
    **run,
) -> dict:
    """The manifest config of a run file: what `--resume` checks is unchanged.

    Files are recorded by content (SHA-256) as well as by name, so an edited grammar, script or
    model file is told apart, and the same content under another path is the same run. The method's prompts are
    hashed from `options` (`solve_options`'; made here when not given), the texts the run sends. `run` may
    set question, shuffle, shuffle_seed, shuffle_range and shard (a comparison's questions are its own).
    """
    options = solve_options(settings, grammar, backoff, collection.task) if options is None else options
    shuffle = run.get("shuffle", False)
    sampled = settings.method in SAMPLING
    return (
        {
            "question": run.get("question"),
            "method": settings.method,
            "loop": settings.loop,
            "data_sha256": collection.sha256,
            "model": settings.model,
            "model_sha256": model_sha256(settings.model),
            "prompt": prompt.source,
            "prompt_sha256": prompt.sha256,
            "exemplars": prompt.exemplars,
            "grammar": grammar.name if grammar else None,
            "grammar_sha256": grammar.sha256 if grammar else None,
            "shuffle": shuffle,
            "shuffle_seed": run.get("shuffle_seed", 0) if shuffle else None,
            "shuffle_range": run.get("shuffle_range") if shuffle else None,
            "shard": run.get("shard"),
            "seed": settings.seed,
            "max_steps": settings.steps(collection.task),
            "max_tokens": settings.step_tokens,
            "n_first": settings.sentences,
            "repeats": settings.repeats,
            "budget": settings.budget,
            "n_ctx": settings.n_ctx,
            "temperature": settings.temperature,
            "samples": settings.cot_samples if sampled else None,
            "sample_temperature": settings.sample_temperature if sampled else None,
            "backoff_prompt": backoff.source if backoff else None,
            "backoff_prompt_sha256": backoff.sha256 if backoff else None,
            "passages": settings.passages,
            "passages_sha256": shared_passages(settings.passages).sha256 if settings.passages else None,
            "drafts": settings.drafts,
            # What a step's call stops at (the tools method's chat turns are not text steps).
            "call_stop": CALL_STOPS[settings.loop] if acts(settings.method) and settings.method != "tools" else None,
        }
        | _reflexion_config(settings, collection.task, options)
        | ({} if task_type(collection.task).writes_programs else _lats_config(settings, options))
        | _program_config(settings, collection, options)
    )


def _program_config(settings: Settings, collection: Collection, options: dict | None = None) -> dict:
    """The program methods' part of the manifest config: their prompts by content, the implementations and token
    limit they ran with, and the box the programs had (`box.box`), which their verdicts depend on. A file of
    problems whose canonical solution fails its own tests is refused here, before any model loads."""
    options = program_options(settings, collection.task) if options is None else options
    if "program" not in options:
        return {}
    sandbox = program_box(settings)
    check_canonical(collection, settings.unboxed_programs)
    chosen = options["program"]
    # Named apart from the run's own settings (the model's temperature, CoT-SC's samples), which they sit beside.
    made = {f"program_{k}": chosen[k] for k in ("children", "tests", "temperature", "samples") if k in chosen}
    if settings.method == LATS and "program_tests" not in made:
        made["program_tests"] = MAX_OWN_TESTS
    if "reference" in chosen:
        reference = chosen["reference"]
        return made | {
            "program_prompts": reference.source,
            "program_prompts_sha256": reference.sha256,
            "iterations": chosen.get("iterations"),
            "max_tokens": 1024,  # every call of the repositories'
            "sandbox": sandbox,
            "rules": "reference",
        }
    prompts = chosen["prompts"]
    texts = "\0".join(getattr(prompts, name) for name in PROGRAM_PROMPTS)
    return made | {
        "program_prompts": prompts.source,
        "program_prompts_sha256": hashlib.sha256(texts.encode()).hexdigest(),
        "iterations": chosen.get("iterations"),
        "max_tokens": options["max_tokens"],
        "sandbox": sandbox,
    }


def program_box(settings: Settings) -> str:
    """The box programs run in here, in words; refused where there is none and the user did not choose to run them
    without one (`--unboxed-programs`)."""
    made = box()
    if not made.boxed and not settings.unboxed_programs:
        raise EnvironmentSetupError(made.refusal())
    return made.said


def _lats_config(settings: Settings, options: dict | None = None) -> dict:
    """LATS's part of the manifest config: its settings and its prompts, by content (a resume with other ones is
    refused, as with a Reflexion run's)."""
    if settings.method != LATS:
        return {}
    prompts = (lats_options(settings) if options is None else options)["lats"]["prompts"]
    keys = ("lats_samples", "lats_values", "lats_depth", "rollout_depth", "evaluator")
    made = {"lats_prompts": prompts.source, "lats_prompts_sha256": prompts.sha256}
    resolved = {"iterations": settings.step_iterations, "lats_temperature": settings.step_lats_temperature}
    return {k: getattr(settings, k) for k in keys} | resolved | made


def _reflexion_config(settings: Settings, task: str = QA.name, options: dict | None = None) -> dict:
    """A Reflexion method's part of the manifest config: its settings and its reflection prompt, by content."""
    if settings.method not in REFLEXION:
        return {}
    reflect = (_reflexion_options(settings, task) if options is None else options)["reflexion"]["reflect_prompt"]
    keys = ("strategy", "evaluator", "context", "reflect_max_tokens")
    return {k: getattr(settings, k) for k in keys} | {
        "trials": settings.question_trials,
        "reflect_prompt": None if reflect is None else reflect.source,
        "reflect_prompt_sha256": None if reflect is None else reflect.sha256,
    }


def model_facts(model: object, embedded: bool) -> dict:
    """What a run records of its loaded model (`details`: its file, name, threads and llama.cpp build, for the
    manifest; `served`: `served_config`'s part of the config), and whether it can apply a grammar. A Ray actor
    sends these back to the driver, which loads no model of its own."""
    details = {
        "model_file": str(model.path) if hasattr(model, "path") else None,
        "model_name": model.name,
        # llama.cpp's threads: its arithmetic depends on the count, so a run records it ("auto": it followed the load)
        "threads": "auto" if getattr(model, "cores", None) is not None else getattr(model, "n_threads", None),
        # how its idle OpenMP threads wait (models.cores.bound_spinning): what a busy machine's wall times depend on
        "openmp": bound_spinning() if embedded else None,
        # the CPU features of its llama.cpp build, whether the weights were repacked, and whether the streams of
        # several workers share one cache (it lays cells out otherwise): they decide its arithmetic
        "llama_cpp": {
            "features": model.build,
            "repack": model.repack,
            "kv_cache": "shared" if model.shared_cache else "per stream",
            # how many workers' tokens a pass holds, as the engine measured and chose (models.batch.calibrate)
            "batching": model.batching,
            # where the few-shot prefix's computed state is kept for later processes (models.states; None: nowhere)
            "prefix_states": None if model.states_folder is None else str(model.states_folder),
        }
        if hasattr(model, "build")
        else None,
    }
    return {"details": details, "served": served_config(model), "supports_grammar": bool(model.supports_grammar)}


def served_config(model: object) -> dict:
    """The manifest config's record of what a server serves (`model_served`: family, model name, and a
    digest of what it says of the file), for a served model; nothing for a model run here, whose file's
    hash is recorded already. A resume or merge compares it, and not the URLs the spec names."""
    served = getattr(model, "served_model", None)
    return {} if served is None else {"model_served": served}


def check_questions(settings: Settings, questions: list[Question]) -> None:
    """Refuse questions the settings cannot run, all of them, before any model loads (see `unrunnable`)."""
    if settings.method in REFLEXION:
        problem = unrunnable(questions, settings.evaluator, settings.context)
        if problem:
            raise DataError(f"{settings.where}{problem}")


@dataclass(frozen=True)
class Parts:
    """What a run's settings name, loaded and checked: its prompts, grammar and manifest config."""

    prompt: Prompt
    grammar: Grammar | None
    backoff: Prompt | None
    config: dict
    options: dict  # `solve_options`': the method's prompts read once, the config's hashes made from them


def load_parts(settings: Settings, collection: Collection, **run) -> Parts:
    """Load and check everything the settings name, before any model loads: a bad file fails first."""
    task = collection.task
    problem = game_problem(settings, task) or program_problem(settings, task) or threads_problem(settings.threads)
    if problem:
        raise DataError(f"{settings.where}{problem}")
    blind = undescribed(collection) if settings.grammar == "commands" else []
    if blind:
        raise DataError(f"{settings.where}{commands_unknown(blind[0])}")
    prompt, grammar, backoff = prompt_of(settings, task), grammar_of(settings), backoff_prompt_of(settings, task)
    options = solve_options(settings, grammar, backoff, task)
    if task_type(task).style == "commands" and settings.loop == "reference" and settings.method in REFLEXION:
        check_code_reflection(options["reflexion"]["reflect_prompt"])  # the Reflexion code's query, before any model
    collection_of(settings, collection)  # opens the passages now: a bad store fails before any model loads
    config = manifest_config(settings, collection, prompt, grammar, backoff, options, **run)
    return Parts(prompt, grammar, backoff, config | check_env(settings, collection, grammar), options)


def shared_passages(path: str) -> Passages:
    """A store or collection opened once per process, so variants and questions share it; a file
    rebuilt or replaced since it was opened (another size or time) is opened again, so its new
    digest is what a resume compares."""
    try:
        stat = Path(path).stat()
        version = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    except OSError:
        version = None  # open_passages names the missing file
    return _opened(path, version)


@functools.cache
def _opened(path: str, version: tuple | None) -> Passages:
    return open_passages(path)


def model_options(settings: Settings) -> dict:
    """The keyword arguments of `load_model` for these settings (a backend drops what it has no use for)."""
    return {
        "n_ctx": settings.n_ctx,
        "temperature": settings.temperature,
        "seed": settings.seed,
        "host": settings.host,
        "workers": settings.workers,
        "drafts": settings.drafts,
        "n_threads": settings.threads,
        "timeout": settings.timeout,
        "per_endpoint": settings.per_endpoint,
    }
