"""`rawreact run`'s options, in the groups its --help shows (the questions, the method and its prompts, the model,
the loop, guardrails, output, Reflexion, LATS, Ray), and the types its values are read as. A flag that sets a
run's setting has no default of its own: left out, the setting comes from `--config` (or `--reference`), else from
`Settings`."""

import argparse

from rawreact.config.choices import (
    CONTEXTS,
    EVALUATORS,
    LOOPS,
    MAX_TOKENS,
    METHODS,
    PROGRAM_ITERATIONS,
    PROGRAM_LATS,
    PROGRAM_TOKENS,
    REPEATS,
    STRATEGIES,
    TRIALS,
)
from rawreact.config.settings import LATS_ITERATIONS, LATS_TEMPERATURE, Settings
from rawreact.models.specs import DEFAULT_MODEL, EMBEDDED_MODELS

_DEFAULT = Settings()


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def threads(text: str) -> int | str:
    """An argparse type: a whole number of at least 1, or auto."""
    if text == "auto":
        return text
    try:
        return positive(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more, or auto") from None


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 0 to 1")
    return value


def cpus(text: str) -> float:
    """An argparse type: a finite number above 0 (a Ray actor's CPUs may be a share of one)."""
    return _above_zero(text, "CPUs", ", such as 1 or 0.5")


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    return _above_zero(text, "seconds")


def _above_zero(text: str, unit: str, example: str = "") -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {unit}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of {unit} above 0{example}")
    return value


def run_parser(commands) -> argparse.ArgumentParser:
    """`rawreact run` and its options, in the groups its --help shows."""
    run = commands.add_parser("run", help="run ReAct episodes, score them, and write a run file")
    by_questions = run.add_argument_group("the questions")
    by_method = run.add_argument_group("the method and its prompts")
    by_model = run.add_argument_group("the model and its sampling")
    by_loop = run.add_argument_group("the loop (grammar, passages, sentences per search)")
    by_guard = run.add_argument_group("guardrails and limits")
    by_output = run.add_argument_group("settings files and output")
    by_trials = run.add_argument_group("Reflexion (--method react-reflexion or cot-reflexion)")
    by_search = run.add_argument_group("LATS (--method lats)")
    by_ray = run.add_argument_group("a Ray cluster (pip install 'rawreact[ray]'; docs: Runs across machines on Ray)")
    by_questions.add_argument(
        "data",
        nargs="?",
        help="questions: a benchmark's name, downloaded once and checked (hotpotqa-dev-distractor; `rawreact data` "
        "lists them); HotpotQA JSON (official or Hugging Face), JSONL, or a collection (envs/ layout); a games folder; "
        "ScienceWorld's episodes, scienceworld[:SPLIT[:TASKS[:N]]] (docs/games.md); HumanEval's problems, "
        "humaneval[:IDS], or a JSONL file in its layout, with --method simple, reflexion or lats (docs/programs.md; "
        "its published figures were measured with --prompt chat); default: the demo",
    )
    by_model.add_argument(
        "--model",
        help=f"{', '.join(EMBEDDED_MODELS)}, a .gguf path, hf:ORG/REPO:FILE|TAG, ollama:NAME, "
        f"openai:[MODEL@]URL (or vllm:, llamacpp:), or scripted:FILE.json (default: {DEFAULT_MODEL})",
    )
    by_model.add_argument("--ollama-host", help="where Ollama listens (default: OLLAMA_HOST, else 127.0.0.1:11434)")
    by_model.add_argument(
        "--timeout",
        type=seconds,
        help=f"seconds to wait for a server's answer to one call before retrying it (default: {_DEFAULT.timeout})",
    )
    by_model.add_argument(
        "--workers",
        type=positive,
        help="questions in flight at once: decoded together by the embedded model, sent at once to a server; "
        f"default: {_DEFAULT.workers}",
    )
    by_model.add_argument(
        "--drafts",
        type=int,
        metavar="K",
        help="embedded model, greedy: guess up to K tokens a pass by prompt lookup and keep those the model agrees "
        "with; slower on a small CPU, and its text can differ in the last bits (docs: Models and servers); default: 0",
    )
    by_model.add_argument(
        "--threads",
        type=threads,
        metavar="N|auto",
        help="embedded model: llama.cpp's threads (default: every core this process may use); auto follows the load, "
        "the cores others leave free, measured every second: no stall on a busy machine, but the text can then "
        "differ from a fixed count's (docs: Models and servers)",
    )
    by_model.add_argument(
        "--per-endpoint",
        type=positive,
        metavar="N",
        help="with several servers in --model (URL,URL,...): episodes in flight on each, where the server does not "
        "say its slot count (default: no bound)",
    )
    by_model.add_argument(
        "--cache",
        metavar="FILE",
        help="an SQLite file of model calls: a call made before (same prompt, model file, settings and version) is "
        "answered from it, and a new one is added; sampled calls are made afresh (default: no cache)",
    )
    by_model.add_argument(
        "--cache-sampled",
        action="store_true",
        default=None,
        help="with --cache: answer sampled calls (temperature above 0, CoT-SC's samples) from it too",
    )
    by_method.add_argument(
        "--method",
        choices=list(METHODS),
        help="react (the default), act (no thoughts), standard, cot, cot-sc (self-consistency), react-cot-sc "
        "(CoT-SC when ReAct gives no answer), cot-sc-react (ReAct when CoT-SC's vote is split), tools (native tool "
        "calls of a chat model), react-reflexion and cot-reflexion (Reflexion: trials that learn from failed ones), "
        "lats (tree search over ReAct steps)",
    )
    by_output.add_argument(
        "--config",
        metavar="FILE",
        help="read the run's settings from a TOML file, or from a finished run's manifest (RUN.jsonl.manifest.json, "
        "or RUN.jsonl) to run it again; flags given beside it override it",
    )
    by_method.add_argument(
        "--reference",
        metavar="DIR",
        help="the ReAct paper's setup, from your checkout DIR of the reference repository: its prompts and "
        "instruction, loop, sampling and scoring; options given beside it override their part",
    )
    by_loop.add_argument(
        "--loop",
        choices=list(LOOPS),
        help="tolerant (rawreact's loop, the default) or reference (the reference notebook's loop and environment, "
        "byte for byte; 5 sentences per search unless --n-first; see docs/reference.md)",
    )
    by_guard.add_argument(
        "--repeats",
        choices=list(REPEATS),
        help="a step that repeats an earlier action and sees the same: off (only counted, the default), note (a note "
        "after its observation tells the model), stop (the episode ends as 'repeat')",
    )
    by_guard.add_argument(
        "--budget",
        type=positive,
        metavar="TOKENS",
        help="tokens per episode (evaluated prompt tokens plus generated ones): a step starts only if the tokens "
        "spent plus --max-tokens fit, or the episode ends as 'budget' (default: no budget)",
    )
    by_method.add_argument(
        "--samples",
        type=positive,
        help="CoT-SC samples per question (default: 21); with programs' simple, implementations sampled a problem for "
        "pass@k (default: one, greedy)",
    )
    by_method.add_argument("--sample-temperature", type=float, help="temperature of CoT-SC's samples (default: 0.7)")
    by_method.add_argument("--prompt", help="an exemplar file, or a reference-style JSON prompt file with --key")
    by_method.add_argument("--key", help="which prompt of a reference-style JSON file, such as webthink_simple6")
    by_method.add_argument("--instruction", help="an instruction file to put before the exemplars (empty: none)")
    by_method.add_argument("--backoff-prompt", help="the prompt of a back-off's second part (default: the shipped one)")
    by_method.add_argument("--backoff-key", help="which prompt of a reference-style --backoff-prompt JSON file")
    by_method.add_argument("--backoff-instruction", help="the instruction of a back-off's second part")
    by_method.add_argument("-k", "--exemplars", type=int, help="use the first K exemplars (default: all)")
    by_loop.add_argument(
        "--grammar",
        nargs="?",
        const="step",
        metavar="MODE",
        help="constrain each step with a GBNF grammar: step (one call; --grammar alone), action (a free thought, "
        "then a constrained action), titles (step, with searches limited to passage titles), commands (a game's "
        "admissible commands), or off (the default)",
    )
    by_loop.add_argument(
        "--grammar-file", help="your own grammar template, in the layout of prompts/grammars/step.gbnf"
    )
    by_loop.add_argument(
        "--env",
        metavar="MODULE:FACTORY",
        help="your own environment or verbs: FACTORY(env) returns the environment to run, given the run's own "
        "(env.with_verbs(calculate) adds a verb); MODULE is imported, from the current folder too, or from the "
        "folder before it (path/to/module:factory)",
    )
    by_loop.add_argument(  # beside --env, whose verbs it bounds
        "--verb-timeout",
        type=seconds,
        metavar="SECONDS",
        help="with --env: a verb that has not answered by then is answered 'Name[arg] failed: no answer within N "
        f"seconds', and the episode goes on (default: {_DEFAULT.verb_timeout:g})",
    )
    by_questions.add_argument("--question", help="ask this question instead of the data's questions")
    by_questions.add_argument("--answer", help="the gold answer of --question, for scoring")
    by_loop.add_argument(
        "--passages",
        help="search these passages instead of each question's own (the open setting): a store built by "
        "`rawreact index`, a collection (envs/ layout) or a HotpotQA file (its paragraphs pooled)",
    )
    by_questions.add_argument("--limit", type=positive, help="run only the first N questions")
    by_questions.add_argument(
        "--shuffle", action=argparse.BooleanOptionalAction, help="shuffle the questions before --limit (default: no)"
    )
    by_questions.add_argument("--shuffle-seed", type=int, help="seed of --shuffle (default: 0)")
    by_questions.add_argument(
        "--shuffle-range",
        type=positive,
        metavar="N",
        help="shuffle the first N questions' indices, as FEVER.ipynb shuffles range(7405) (default: all)",
    )
    by_questions.add_argument(
        "--shard",
        metavar="K/N",
        help="run the K-th of N parts of the chosen questions (every N-th from the K-th), into a run file of its "
        "own; `rawreact merge` joins the parts (default: all)",
    )
    ray_where = by_ray.add_mutually_exclusive_group()  # both would name a cluster: neither silently wins
    ray_where.add_argument(
        "--ray",
        action="store_const",
        const="local",
        help="answer the questions on Ray actors, on a Ray started for the run and stopped after it",
    )
    ray_where.add_argument(
        "--ray-address",
        dest="ray",
        metavar="ADDRESS",
        help="answer them on the running Ray cluster at ADDRESS (host:port; auto: the one RAY_ADDRESS names), "
        "and leave it running",
    )
    by_ray.add_argument(
        "--actors",
        type=positive,
        help="Ray actors, each holding a model and --workers questions (default: one a node)",
    )
    by_ray.add_argument(
        "--actor-cpus",
        type=cpus,
        metavar="CPUS",
        help="CPUs each actor reserves, and the embedded model's threads unless --threads says (default: 1)",
    )
    by_model.add_argument("--seed", type=int, help=f"seed of sampling (default: {_DEFAULT.seed})")
    by_output.add_argument("--out", help="write one JSON line per question to this run file, and a manifest beside it")
    by_output.add_argument(
        "--resume", action="store_true", help="continue the run in --out, skipping finished questions"
    )
    by_guard.add_argument(
        "--max-steps",
        type=positive,
        help="step limit per question (default: 7, or 5 for the ReAct part of a FEVER react-cot-sc, as the paper)",
    )
    by_model.add_argument(
        "--max-tokens",
        type=positive,
        help=f"token limit per model call (default: a step's {MAX_TOKENS}; an implementation's {PROGRAM_TOKENS})",
    )
    by_loop.add_argument(
        "--n-first", type=positive, help="sentences a search shows (default: 2, or 5 with --loop reference)"
    )
    by_model.add_argument(
        "--n-ctx", type=positive, help=f"context window of a llama.cpp model (default: {_DEFAULT.n_ctx})"
    )
    by_model.add_argument(
        "--temperature", type=float, help=f"sampling temperature (default: {_DEFAULT.temperature}, greedy)"
    )
    by_output.add_argument("-q", "--quiet", action="store_true", help="print only the result lines")
    _reflexion_options(by_trials)  # last: the usage line starts with the options most runs use, not these
    _lats_options(by_search)
    return run


def _lats_options(group) -> None:
    """The options of LATS's settings, named as its repository names them where it does."""
    group.add_argument(
        "--lats-samples", type=positive,
        help=f"steps sampled at each expansion (its --n_generate_sample; default: {_DEFAULT.lats_samples})",
    )  # fmt: skip
    group.add_argument(
        "--lats-values", type=positive,
        help=f"samples of each value prompt, the first read (its --n_evaluate_sample; default: {_DEFAULT.lats_values})",
    )  # fmt: skip
    group.add_argument(
        "--iterations",
        type=positive,
        help=f"iterations of the search (default: {LATS_ITERATIONS}; {PROGRAM_LATS['iterations']} over programs)",
    )
    group.add_argument(
        "--lats-depth", type=positive, help=f"depth past which a node is not expanded (default: {_DEFAULT.lats_depth})"
    )
    group.add_argument(
        "--rollout-depth", type=positive, help=f"depth a rollout stops at (default: {_DEFAULT.rollout_depth})"
    )
    group.add_argument(
        "--lats-temperature", type=float,
        help=f"sampling temperature of every LATS call (its --temperature; default: {LATS_TEMPERATURE}; "
        f"{PROGRAM_LATS['temperature']:g} over programs)",
    )  # fmt: skip
    group.add_argument(
        "--lats-prompts",
        help="its repository's hotpot/hotpot.py, whose prompts --loop reference sends (--reference DIR sets it)",
    )
    group.add_argument("--value-prompt", help="the value prompt of rawreact's rules (default: prompts/lats/value.txt)")
    group.add_argument(
        "--number-of-tests", type=positive,
        help="programs: the model's own tests kept a problem, as the repositories name it (default: 6 under "
        "rawreact's rules; under --reference 1 for reflexion and 2 for lats, the repositories' run scripts)",
    )  # fmt: skip
    group.add_argument(
        "--program-reference",
        help="programs: a clone's generators/py_generate.py (Reflexion's programming_runs/ or LATS's programming/), "
        "whose prompts and calls --loop reference sends (--reference DIR sets it)",
    )
    group.add_argument(
        "--unboxed-programs", action="store_true", default=None,
        help="programs: where this machine has no box for them (no bubblewrap, or no user namespaces), run them "
        "anyway, with your own rights: they can then read and write your files (default: refuse, saying why)",
    )  # fmt: skip


def _reflexion_options(group) -> None:
    """The options of the Reflexion methods' settings."""
    group.add_argument(
        "--trials",
        type=positive,
        help=f"trials per question, until one passes (default: {TRIALS}); programs' reflexion: implementations a "
        f"problem (default: {PROGRAM_ITERATIONS})",
    )
    group.add_argument(
        "--strategy",
        choices=list(STRATEGIES),
        help="what a trial after a failed one is shown: base (nothing), last_trial (the last trial), reflexion (the "
        "reflections written so far, the default), last_trial_and_reflexion (the last trial and its reflection)",
    )
    group.add_argument(
        "--evaluator",
        choices=list(EVALUATORS),
        help="who says a trial failed (LATS: what rewards a finish): em (the gold answer's exact match, the paper's "
        "oracle; the default) or supported (no gold answer: the answer must occur in what the trial read)",
    )
    group.add_argument(
        "--context",
        choices=list(CONTEXTS),
        help="cot-reflexion's context before the question: none (the default) or gold (the supporting paragraphs, "
        "the paper's CoT (GT))",
    )
    group.add_argument(
        "--reflect-prompt",
        help="the reflections' exemplars: a file in rawreact's layout, or a .py/.json file with "
        "--reflect-key (the Reflexion code's fewshots.py)",
    )
    group.add_argument("--reflect-key", help="which string of a .py or .json --reflect-prompt, such as REFLECTIONS")
    group.add_argument(
        "--reflect-instruction",
        help="the reflections' instruction: a text file, or FILE.py#NAME (a template with {examples}, as the "
        "Reflexion code's prompts.py#REFLECT_INSTRUCTION)",
    )
    group.add_argument(
        "--reflect-max-tokens",
        type=positive,
        help=f"token limit of a reflection call (default: {_DEFAULT.reflect_max_tokens})",
    )
