"""The ReAct paper's setup in one switch: `rawreact run DATA --reference DIR`, where DIR is the user's
checkout of the reference repository (its `prompts/` and notebooks; nothing of it ships here).

For HotpotQA and FEVER alike it chooses what the reference used: its loop and environment, its prompt
file and key for each method (a back-off's two parts included), the HotpotQA notebook's instruction
read from the user's copy of `hotpotqa.ipynb` (FEVER's prompt carries its own, and FEVER.ipynb sends
nothing in front of it), 5 sentences per search, 7 steps (5 for FEVER's ReAct -> CoT-SC, as the
paper says), the notebooks' sample of 500 (indices shuffled by `random.Random(233)` over
`range(7405)`), and the reference's scoring. Any option given beside it overrides that part, and
`describe` says, part by part, what is the paper's and what is not.
"""

import hashlib
from pathlib import Path

from rawreact.config.choices import BACKOFFS, LATS, LOOPS, METHODS, REASONING, REFLEXION
from rawreact.core.errors import DataError
from rawreact.core.files import read_whole
from rawreact.core.tasks import QA, Reference, task_type

# Each task type declares its reference files (`core.tasks.Reference`): the prompt file and notebook. A game's
# exemplars are ALFWorld's household; over TextWorld games they give the paper's format, not its task.
SHUFFLE_SEED, SHUFFLE_RANGE, SAMPLE = 233, 7405, 500  # both notebooks: random.Random(233) over range(7405), first 500
LATS_PROMPTS = "hotpot/hotpot.py"  # the file of LATS's repository that holds its HotpotQA prompts
# The files of Reflexion's and LATS's repositories that hold their programming prompts (agents.programs_reference)
REFLEXION_FILE = "programming_runs/generators/py_generate.py"  # in a clone of noahshinn/reflexion
LATS_FILE = "programming/generators/py_generate.py"  # in a clone of andyz245/LanguageAgentTreeSearch
OPTIONS = (
    "loop",
    "lats_prompts",
    "prompt",
    "key",
    "instruction",
    "backoff_prompt",
    "backoff_key",
    "backoff_instruction",
    "shuffle",
    "shuffle_seed",
    "shuffle_range",
    "limit",
)


# What a games run's header says of its games, by what they are: (whose, how each opens, what is not the paper's).
GAMES = {
    "described": ("TextWorld's", "each opening laid out as ALFWorld's (its room, then `Your task is to: ` and its "
                  "objective)", ", not its task"),
    "undescribed": ("TextWorld's, without TextWorld's .json", "each opening the interpreter's first text (without "
                    "the .json the room and objective are not known apart)", ", not its task"),
    "rows": ("your --env environment's, one a row of the games file", "each opening as the environment gives it "
             "(ALFWorld's banner dropped, as the notebook drops it)", ""),
}  # fmt: skip


def _reference(task: str) -> Reference:
    return task_type(task).reference


def _key(task: str, part: str) -> str:
    """The reference's prompt key of one part (a method's `reference_key`), as the task's file spells it."""
    return _reference(task).prompt_key(METHODS[part].reference_key, part)


def reference_options(directory: str | Path, task: str, method: str, questions: int) -> dict[str, object]:
    """The `rawreact run` options of the paper's setup for `method` on a `task` file of `questions` questions."""
    directory = Path(directory).expanduser()
    if task_type(task).writes_programs:  # Reflexion's programming_runs/ or LATS's programming/: their generators
        return {"loop": "reference", "program_reference": str(program_file(directory, method))}
    if method == LATS:  # LATS's own repository (andyz245/LanguageAgentTreeSearch): its prompts, and lats.py's rules
        prompts = directory / LATS_PROMPTS
        if not prompts.is_file():
            raise DataError(
                f"--reference {directory}: no {LATS_PROMPTS} there; with --method lats give a clone of LATS's "
                "repository (andyz245/LanguageAgentTreeSearch)"
            )
        return {"loop": "reference", "lats_prompts": str(prompts)}
    if method == "tools":
        raise DataError("--reference sets up the paper's methods, and native tool calls are not one of them")
    if method in REFLEXION:
        raise DataError(
            "--reference sets up the ReAct paper's methods, and Reflexion is not one of them; for the Reflexion "
            "code's prompts give --reflect-prompt, --reflect-key and --reflect-instruction (see docs/reflexion.md)"
        )
    reference = _reference(task)
    for needed in (reference.prompt_file, reference.notebook):
        if not (directory / needed).is_file():
            raise DataError(
                f"--reference {directory}: no {needed} there; give a checkout of the reference repository "
                "(the ReAct paper's code: its prompts/ folder and notebooks)"
            )
    if reference.methods is not None:  # a task the paper ran some methods on: their prompts, and nothing else
        if method not in reference.methods:
            rows = " and ".join(reference.methods)
            raise DataError(f"--reference sets up the paper's rows {rows} for this task ({task}), not {method}")
        options = {"prompt": str(directory / reference.prompt_file), "key": reference.prompt_key("", method)}
        if reference.frame is not None:  # the notebook's own loop, with the notebook's words around the exemplars
            options |= {"instruction": f"{directory / reference.notebook}#{reference.frame}", "loop": "reference"}
        if reference.max_tokens is not None:
            options["max_tokens"] = reference.max_tokens
        return options
    first, second = BACKOFFS.get(method, (method, None))
    prompt = str(directory / reference.prompt_file)
    instruction = f"{directory / _reference(QA.name).notebook}#instruction"  # HotpotQA's, before its ReAct prompt
    options: dict[str, object] = {"prompt": prompt, "key": _key(task, first)}
    if method not in REASONING:  # Standard, CoT and CoT-SC take no action, so run in no loop
        # WikiEnv's 5 sentences a search, named, so that they stay the paper's under --loop tolerant too
        options |= {"loop": "reference", "n_first": LOOPS["reference"]}
    if reference.notebook_instruction and first == "react":
        options["instruction"] = instruction
    if second is not None:
        options |= {"backoff_prompt": prompt, "backoff_key": _key(task, second)}
        if reference.notebook_instruction and second == "react":
            options["backoff_instruction"] = instruction
    options |= {"shuffle": True, "shuffle_seed": SHUFFLE_SEED, "limit": SAMPLE} if reference.sampled else {}
    if questions >= SHUFFLE_RANGE:
        options["shuffle_range"] = SHUFFLE_RANGE
    return options


def program_file(directory: str | Path, method: str) -> Path:
    """The clone's `py_generate.py` for `method`: Reflexion's for simple and reflexion, LATS's for lats."""
    name = LATS_FILE if method == LATS else REFLEXION_FILE
    path = Path(directory).expanduser() / name
    if not path.is_file():
        whose = "LATS's repository (andyz245/LanguageAgentTreeSearch)" if method == LATS else (
            "Reflexion's repository (noahshinn/reflexion)")  # fmt: skip
        raise DataError(f"--reference {directory}: no {name} there; with --method {method} give a clone of {whose}")
    return path


def files(directory: str | Path, task: str, method: str = "react") -> dict[str, str]:
    """The reference files the setup reads, by their path in the checkout, with their SHA-256."""
    directory = Path(directory).expanduser()
    if task_type(task).writes_programs:
        names = (LATS_FILE if method == LATS else REFLEXION_FILE,)
        return {name: hashlib.sha256(read_whole(directory / name)).hexdigest() for name in names}
    reference = _reference(task)
    names = (LATS_PROMPTS,) if method == LATS else (reference.prompt_file, reference.notebook)
    return {name: hashlib.sha256(read_whole(directory / name)).hexdigest() for name in names}


def describe(options: dict[str, object], given: dict[str, object], chosen: dict[str, object]) -> list[str]:
    """Lines that say, part by part, what of a run's setup is the paper's and what is not.

    `options` are the paper's, `given` the ones the user gave instead (by option name), and `chosen`
    the rest of the run: task, questions, passages, model, method, n_first, max_steps.
    """

    def part(name: str, paper: str, yours: str | None) -> str:
        return f"  paper's: {name}: {paper}" if yours is None else f"  yours:   {name}: {yours} (the paper's: {paper})"

    if "program_reference" in options:  # Reflexion's or LATS's programming runs
        whose = "LATS's mcts.py" if "programming/" in str(options["program_reference"]) else (
            "Reflexion's simple.py and reflexion.py")  # fmt: skip
        return [
            part(
                "prompts",
                f"{options['program_reference']} (its generators' chat or completion prompts)",
                _given(given, "program_reference"),
            ),  # fmt: skip
            part("rules", f"{whose}, call for call (--loop reference)", _given(given, "loop")),
            f"  not the paper's: model: {chosen['model']} (the repositories ran gpt-4 and gpt-3.5-turbo; see "
            "docs/reference.md, P1 to P9)",
        ]
    if "lats_prompts" in options:  # LATS's repository
        return [
            part(
                "prompts",
                f"{options['lats_prompts']} (cot_prompt, value_prompt_reasoning, reflection_prompt and their forms)",
                _given(given, "lats_prompts"),
            ),  # fmt: skip
            part("rules", "lats.py's search, byte for byte (--loop reference)", _given(given, "loop")),
            "  not the paper's: questions: the data's (LATS ran questions 0 to 99 of HotpotQA's train split, "
            "over live Wikipedia)",
            "  not the paper's: token counts for its 4,000-token limit: the model's own tokenizer (its: GPT-2's)",
            f"  not the paper's: model: {chosen['model']}, a completion model sent the text as it is (the paper's: "
            "gpt-3.5-turbo, the text sent as one user message of a chat)",
        ]
    key, reference = options.get("key"), _reference(chosen["task"])
    lines = [part("prompt", f"{options['prompt']}#{key}", _given(given, "prompt", "key"))]
    if reference.methods is not None:  # the paper's decision-making rows (ALFWorld's): a game
        frame = options.get("instruction", "none")
        steps = task_type(chosen["task"]).step_limit(chosen["method"])
        said = [
            part("frame", f"{frame}: its words before the exemplars and after them", _given(given, "instruction")),
            part("loop", reference.loop_said, _given(given, "loop")),
            part("steps", str(steps), None if chosen["max_steps"] in (None, steps) else str(chosen["max_steps"])),
        ]
        if reference.max_tokens is not None:
            tokens = reference.max_tokens
            said.append(
                part("tokens a call", str(tokens), None if "max_tokens" not in given else str(given["max_tokens"]))
            )
        games = chosen.get("games") or GAMES["described"]
        named = {"model": chosen["model"], "games": games[0], "openings": games[1], "not_task": games[2]}
        return lines + said + [f"  not the paper's: {d.format(**named)}" for d in reference.differences]
    instruction = options.get("instruction", "none (the prompt file's own)" if reference.own_instruction else "none")
    lines.append(part("instruction", str(instruction), _given(given, "instruction")))
    if "backoff_key" in options:
        backoff = f"{options['backoff_prompt']}#{options['backoff_key']}"
        lines.append(part("back-off prompt", backoff, _given(given, "backoff_prompt", "backoff_key")))
    if "loop" in options:  # a method that acts
        lines.append(part("loop", "reference (the notebook's webthink and WikiEnv)", _given(given, "loop")))
        n_first = chosen["n_first"]
        lines.append(part("sentences per search", "5", None if n_first in (None, 5) else str(n_first)))
        paper_steps = task_type(chosen["task"]).step_limit(chosen["method"])
        steps = chosen["max_steps"]
        lines.append(part("steps", str(paper_steps), None if steps in (None, paper_steps) else str(steps)))
    sample = f"{SAMPLE} questions, indices shuffled by random.Random({SHUFFLE_SEED}) over range({SHUFFLE_RANGE})"
    if "shuffle_range" not in options and not {"shuffle", "shuffle_seed", "shuffle_range"} & set(given):
        lines.append(
            f"  not the paper's: sample: the data holds {chosen['questions']} questions, fewer than {SHUFFLE_RANGE}, "
            f"so all their indices are shuffled (the paper's: {sample})"
            + (f"; yours: {_given(given, 'limit')}" if "limit" in given else "")
        )
    else:
        lines.append(part("sample", sample, _given(given, "shuffle", "shuffle_seed", "shuffle_range", "limit")))
    lines.append("  paper's: scoring: EM and F1 as the reference scores them (a claim: its label, normalised)")
    lines.append(f"  not the paper's: passages: {chosen['passages']} (the paper searched live Wikipedia)")
    model = f"{chosen['model']} (the paper's: PaLM-540B; the notebooks: text-davinci-002)"
    lines.append(f"  not the paper's: model: {model}")
    return lines


def _given(given: dict[str, object], *names: str) -> str | None:
    found = [f"--{name.replace('_', '-')} {given[name]}" for name in names if name in given]
    return ", ".join(found) if found else None
