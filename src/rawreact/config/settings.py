"""`Settings`: everything that defines a run, as one frozen value checked when it is made.

The questions (data, limit, shuffle), the method and its prompts, the model and its sampling, the
loop, grammar, passages and guardrails, the limits, and how the questions are sent (workers, host,
timeout). `rawreact run` builds one from its flags (over a `--config` file), `compare` makes each
variant one (experiments/variants.py's `Variant` adds a name), the manifest stores it, and `--config
RUN.jsonl.manifest.json` reads it back. A bad value is one `DataError` naming the key, the value and
what is allowed, raised before any file is read or any model loads.

One room: `Settings` is one value, and its checks are of settings against each other (a method and its
grammar, Reflexion's and LATS's options, Ray's); split by topic, every check would import the others' fields.
"""

import math
import types
from dataclasses import dataclass, field, fields
from typing import Union, get_args, get_origin

from rawreact.config.choices import (
    BACKOFFS,
    CONTEXTS,
    EVALUATORS,
    LATS,
    LATS_EVALUATORS,
    LOOPS,
    MAX_TOKENS,
    METHODS,
    MODES,
    REFLECT_TOKENS,
    REFLECTING,
    REFLEXION,
    REPEATS,
    SAMPLING,
    STRATEGIES,
    TRIALS,
    acts,
    guard_problem,
    loop_problem,
)
from rawreact.core.errors import DataError
from rawreact.core.modules import module_problem
from rawreact.core.tasks import QA, task_type
from rawreact.core.text import whole_number
from rawreact.models.specs import DEFAULT_MODEL, DRAFTS_MAX, STREAMS_MAX, is_embedded, sequences_problem

# The least value each count may take, and the largest seed every backend takes (llama.cpp, vLLM
# and Ollama read it as an unsigned 32-bit number).
_LEAST = {
    "n_first": 1,
    "max_steps": 1,
    "max_tokens": 1,
    "n_ctx": 1,
    "k": 0,
    "samples": 1,
    "budget": 1,
    "seed": 0,
    "limit": 1,
    "shuffle_range": 1,
    "workers": 1,
    "actors": 1,
    "drafts": 0,
    "per_endpoint": 1,
    "trials": 1,
    "reflect_max_tokens": 1,
    "lats_samples": 1,
    "lats_values": 1,
    "iterations": 1,
    "lats_depth": 1,
    "rollout_depth": 1,
    "number_of_tests": 1,
}
_TOGETHER = f"a call's samples decode together (llama.cpp has {STREAMS_MAX} sequences for them)"
# The largest value a count may take, and why: each is checked before any model loads.
_MOST = {
    "drafts": (
        DRAFTS_MAX,
        f"a pass checks 1 + K tokens a stream, and more than {DRAFTS_MAX} guesses cost more than they save",
    ),  # fmt: skip
    # Under the reflexion strategy each trial's prompt carries every reflection before it, so the trials' prompts
    # and the log of trials under way grow with the square of the count (1,900 trials made a 172 MB log).
    # A call's samples decode together: on the embedded model as sequences of one llama.cpp context (it has 256,
    # less the kept prompts'), on a server as requests in flight; so their count is bounded on every backend.
    "samples": (STREAMS_MAX, _TOGETHER),
    "lats_samples": (STREAMS_MAX, _TOGETHER + "; the LATS repository samples 5"),
    "lats_values": (STREAMS_MAX, _TOGETHER + "; the LATS repository samples 1"),
    "iterations": (1000, "the LATS repository runs 30 (50 by default), each a few model calls"),
    "lats_depth": (100, "a path of more steps does not fit a model's context"),
    "rollout_depth": (100, "a path of more steps does not fit a model's context"),
    "number_of_tests": (100, "each test is run on every implementation, and the repositories keep 1 to 6"),
    "trials": (
        100,
        "each trial's prompt holds every reflection before it, so prompts and the trial log grow "
        "with the square of the count; the Reflexion paper plots 7",
    ),  # fmt: skip
}
SEED_MAX = 2**32 - 1
COT_SAMPLES = 21  # CoT-SC's samples a question, the paper's 21
LATS_ITERATIONS = 30  # LATS's iterations over ReAct steps: its repository's hotpot/lats.sh
LATS_TEMPERATURE = 1.0  # LATS's temperature over ReAct steps: its repository's --temperature
THREADS_MAX = 512  # llama.cpp's GGML_MAX_N_THREADS: a threadpool of more is refused by llama.cpp itself
# The command-line option of each setting whose name differs from `--name-with-hyphens`.
OPTIONS = {"k": "--exemplars", "host": "--ollama-host"}


def _file(default: str | None = None):
    """A setting that names a file: a settings file reads it relative to itself, a manifest records it
    absolute, and a run refuses an --out that would overwrite it. Declared here, so none can be missed."""
    return field(default=default, metadata={"file": True})


@dataclass(frozen=True, kw_only=True)
class Settings:
    """One run's settings. Every field has the default `rawreact run` uses.

    `method` is one of METHODS; `prompt`, `key`, `instruction`, `k` and `order` set its prompt (for
    a back-off, its first part's), and `backoff_prompt`, `backoff_key` and `backoff_instruction` the
    prompt of a back-off's second part. `samples` and `sample_temperature` are CoT-SC's n and T
    (`samples` None: 21) and pass@k's n and T for programs' simple (`samples` None: one greedy implementation).
    `loop` is "tolerant" (rawreact's) or "reference" (the notebook's, byte for byte); `n_first`,
    unless set, is the loop's default (2 and 5). `grammar` is None (off) or a mode. `repeats`
    ("off", "note", "stop") and `budget` (tokens per episode, or None) are the guardrails.
    `passages` (a store from `rawreact index`, or a collection file) replaces each question's own
    paragraphs: HotpotQA's open ("fullwiki") setting. `data` None is the demo collection.

    The Reflexion methods (react-reflexion, cot-reflexion) take `trials`, `strategy` (STRATEGIES),
    `evaluator` (EVALUATORS), `context` (CoT's: "none", or "gold", the question's supporting
    paragraphs), and the reflection prompt (`reflect_prompt`, `reflect_key`, `reflect_instruction`)
    with its own `reflect_max_tokens`; other methods leave them at their defaults.
    """

    # What decides each episode: a comparison's variants differ in these.
    method: str = "react"
    loop: str = "tolerant"
    model: str = DEFAULT_MODEL
    prompt: str | None = _file()
    key: str | None = None
    instruction: str | None = _file()
    k: int | None = None
    order: int | None = None
    grammar: str | None = None
    grammar_file: str | None = _file()
    env: str | None = (
        None  # `package.module:factory`: the user's environment, from the run's own (see environments.custom)
    )
    verb_timeout: float = 60.0  # seconds a user's verb may take before it is answered as failed
    n_first: int | None = None
    repeats: str = "off"
    budget: int | None = None
    max_steps: int | None = None  # None: the paper's, 7 (5 for FEVER's ReAct -> CoT-SC); see `steps`
    max_tokens: int | None = None  # None: the method's, a step's 100 (MAX_TOKENS); a program's implementation 512
    temperature: float = 0.0
    seed: int = 0
    n_ctx: int = 8192
    drafts: int = 0  # tokens the embedded model guesses by prompt lookup per decode pass (0: none)
    threads: int | str | None = (
        None  # the embedded model's llama.cpp threads: a count, "auto" (follow the load), None: every core
    )
    samples: int | None = None  # None: the method's, CoT-SC's 21 (COT_SAMPLES); a program's simple draws 1, greedy
    sample_temperature: float = 0.7
    backoff_prompt: str | None = _file()
    backoff_key: str | None = None
    backoff_instruction: str | None = _file()
    passages: str | None = _file()
    trials: int | None = None  # None: the method's, 7 a question (TRIALS); programs' reflexion writes 5 implementations
    strategy: str = "reflexion"
    evaluator: str = "em"
    context: str = "none"
    reflect_prompt: str | None = _file()
    reflect_key: str | None = None
    reflect_instruction: str | None = _file()
    reflect_max_tokens: int = REFLECT_TOKENS
    # LATS (--method lats): its repository's settings and defaults (hotpot/lats.sh, lats.py), and its prompts.
    lats_samples: int = 5  # --n_generate_sample: steps sampled at each expansion
    lats_values: int = 1  # --n_evaluate_sample: samples of each value prompt (the first is read)
    iterations: int | None = (
        None  # --iterations; None: the method's, 30 over ReAct steps (LATS_ITERATIONS), 8 over programs
    )
    lats_depth: int = 7  # expand_node's depth limit
    rollout_depth: int = 4  # rollout's max_depth
    lats_temperature: float | None = (
        None  # its --temperature, every LATS call's; None: 1.0 over ReAct steps, 0.8 over programs
    )
    lats_prompts: str | None = _file()  # the repository's hotpot/hotpot.py, whose prompts the reference rules send
    value_prompt: str | None = _file()  # rawreact's rules: the value prompt (default prompts/lats/value.txt)
    # Programs (--data humaneval): a reference repository's generators/py_generate.py, whose prompts and calls the
    # reference rules send (Reflexion's or LATS's programming runs), and how many of the model's own tests are kept.
    program_reference: str | None = _file()
    number_of_tests: int | None = None
    # The questions, and how they are sent: a comparison's variants share these.
    data: str | None = _file()
    question: str | None = None
    answer: str = ""
    limit: int | None = None
    shuffle: bool = False
    shuffle_seed: int = 0
    shuffle_range: int | None = None
    shard: str | None = None  # "K/N": the K-th of N parts of the chosen questions (see `shard_of`)
    workers: int = 1
    per_endpoint: int | None = None  # a fleet's episodes in flight per server, where the server does not say
    host: str | None = None
    timeout: float = 300.0
    cache: str | None = _file()  # an SQLite file of model calls: a call made before is answered from it
    cache_sampled: bool = False  # whether sampled calls may be answered from the cache too
    # Model-written programs run in a box (environments.box); where this machine has none, only this runs them,
    # with the user's own rights (--unboxed-programs). It changes nothing where there is a box.
    unboxed_programs: bool = False
    # A Ray cluster's actors answer the questions (runs.cluster): "local" starts one for the run, "auto" joins
    # RAY_ADDRESS's, and any other value is the address of one to join.
    ray: str | None = None
    actors: int | None = None  # how many actors (default: one a node of the cluster)
    actor_cpus: float = 1.0  # the CPUs each actor reserves: the embedded model's threads, unless --threads says

    def __post_init__(self) -> None:
        for key in KEYS:  # a Variant's name is checked by the Variant
            value = getattr(self, key)
            if isinstance(value, int) and not isinstance(value, bool) and float in _kinds(key):
                object.__setattr__(self, key, float(value))  # 1 in a file is the temperature 1.0
        problem = self.problem()
        if problem:
            raise DataError(f"{self.where}{problem}")

    def problem(self) -> str | None:
        """What is wrong with these settings, or None: each value alone (`value_problem`), then together."""
        for key in KEYS:
            problem = value_problem(key, getattr(self, key))
            if problem:
                return problem
        if (self.grammar or self.grammar_file) and not acts(self.method):
            return f"a grammar constrains action lines, and method {self.method} writes none; drop the grammar"
        problem = self._reflexion_problem() or self._program_problem()
        if problem:
            return problem
        problem = loop_problem(self.loop, self.method, bool(self.grammar or self.grammar_file), self.repeats)
        problem = problem or guard_problem(self.method, self.repeats, self.budget)
        backoff = self.backoff_prompt or self.backoff_key or self.backoff_instruction
        if problem is None and backoff and self.method not in BACKOFFS:
            return f"the backoff prompt settings apply to {' and '.join(BACKOFFS)} only"
        if problem is None and self.env is not None:
            problem = env_problem(self.env, self.method)
        if problem is None and self.verb_timeout != _DEFAULTS["verb_timeout"] and self.env is None:
            return f"verb_timeout={self.verb_timeout:g} (--verb-timeout) bounds the verbs of --env; give --env too"
        if problem is None and self.threads is not None and not is_embedded(self.model):
            return (
                f"threads={self.threads} (--threads) sets the embedded llama.cpp model's threads; {self.model} "
                "decodes elsewhere, so drop --threads"
            )
        if problem is None and self.drafts and not is_embedded(self.model):
            return (
                f"drafts={self.drafts} (--drafts) is for the embedded llama.cpp model, which drafts inside its own "
                f"engine; {self.model} decodes elsewhere, so drop --drafts"
            )
        if problem is None:
            problem = self._ray_problem()
        if problem is None and self.cache_sampled and not self.cache:
            return "cache_sampled (--cache-sampled) lets sampled calls come from the cache: give it, --cache FILE"
        return problem or sequences_problem(self.model, self.cot_samples if self.method in SAMPLING else 1, "samples")

    def _ray_problem(self) -> str | None:
        """What is wrong with the Ray settings, or None."""
        if self.ray is None:
            changed = [option(k) for k in ("actors", "actor_cpus") if getattr(self, k) != _DEFAULTS[k]]
            return f"{' and '.join(changed)} place the actors of --ray: give --ray too" if changed else None
        if self.cache:
            return (
                "--cache is one SQLite file that one process writes, and --ray answers in many; drop --cache, or "
                "run without --ray"
            )
        return None

    def _lats_problem(self) -> str | None:
        """What is wrong with the LATS settings for the method, or None."""
        changed = [k for k in LATS_KEYS if getattr(self, k) != _DEFAULTS[k]]
        if self.method != LATS:
            return f"{', '.join(changed)} apply to --method lats only" if changed else None
        if self.evaluator not in LATS_EVALUATORS:
            return f"evaluator={self.evaluator!r}: LATS rewards a finish by {' or '.join(LATS_EVALUATORS)}"
        if self.loop == "reference" and self.lats_prompts is None and self.program_reference is None:
            return (
                "LATS under --loop reference sends its repository's prompts: give --lats-prompts "
                "LATS/hotpot/hotpot.py (or --reference LATS, a clone of andyz245/LanguageAgentTreeSearch)"
            )
        if self.loop == "tolerant" and self.lats_prompts is not None:
            return "--lats-prompts are the repository's, which its rules send: add --loop reference"
        if self.loop == "reference" and self.value_prompt is not None:
            return "--value-prompt is rawreact's rules' value prompt; the reference rules send the repository's"
        return None

    def _program_problem(self) -> str | None:
        """A setting a program method would take and ignore, or None."""
        if self.samples is not None and self.method in ("reflexion", LATS):
            own = "--trials implementations" if self.method == "reflexion" else "--lats-samples children a node"
            return (
                f"samples={self.samples} (--samples) draws implementations for pass@k with method simple; "
                f"{self.method} makes its own ({own}): drop --samples"
            )
        if (
            self.method == "simple"
            and self.samples is None
            and self.sample_temperature != _DEFAULTS["sample_temperature"]
        ):
            return (
                f"sample_temperature={self.sample_temperature:g} (--sample-temperature) is the temperature of "
                "--samples, and simple without --samples writes one greedy implementation: give --samples N too"
            )
        if self.method == "simple" and self.max_steps is not None:
            return (
                f"max_steps={self.max_steps} (--max-steps) bounds a loop of steps, and simple writes one "
                "implementation: drop --max-steps"
            )
        return None

    def _reflexion_problem(self) -> str | None:
        """What is wrong with the Reflexion settings for the method, or None."""
        problem = self._lats_problem()
        if problem or self.method == LATS:  # LATS takes an evaluator of the Reflexion settings, and no other
            others = [k for k in REFLEXION_KEYS if k != "evaluator" and getattr(self, k) != _DEFAULTS[k]]
            return problem or (f"{', '.join(others)} apply to the Reflexion methods only" if others else None)
        changed = [k for k in REFLEXION_KEYS if getattr(self, k) != _DEFAULTS[k]]
        if self.method == "reflexion":  # programs' Reflexion: its implementations are --trials, judged by tests
            others = [k for k in changed if k != "trials"]
            if others:
                said = ", ".join(others)
                return f"{said} apply to the Reflexion methods of questions; programs' reflexion takes --trials"
            return None
        if self.method not in REFLEXION:
            if changed:
                return f"{', '.join(changed)} apply to the Reflexion methods ({' and '.join(REFLEXION)}) only"
            return None
        unused = [k for k in REFLECT_KEYS if getattr(self, k) != _DEFAULTS[k]]
        if unused and self.strategy not in REFLECTING:  # a missing file would never be noticed
            return (
                f"{', '.join(option(k) for k in unused)} set{'s' if len(unused) == 1 else ''} the reflection "
                f"prompt, and strategy {self.strategy} writes no reflections; drop "
                f"{'it' if len(unused) == 1 else 'them'}, or use --strategy {' or '.join(REFLECTING)}"
            )
        if self.evaluator == "won" and self.method != "react-reflexion":
            return "evaluator=won judges a game's trial, and games are played by react-reflexion, not cot-reflexion"
        if self.context != "none" and self.method != "cot-reflexion":
            return f"context={self.context!r} gives CoT its paragraphs: it applies to cot-reflexion only"
        if self.evaluator == "supported" and self.method == "cot-reflexion" and self.context == "none":
            return (
                "evaluator=supported looks for the answer in what the trial read, and CoT without context reads "
                "nothing; give context=gold (--context gold), or use evaluator=em"
            )
        return None

    @property
    def shard_of(self) -> tuple[int, int] | None:
        """`shard` as (K, N), or None: the whole of the chosen questions."""
        return None if self.shard is None else parse_shard(self.shard)

    def steps(self, task: str = QA.name) -> int:
        """The step limit: `max_steps`, or the task type's for the method (`core.tasks`): the paper's, 7, and 5
        for the ReAct part of FEVER's ReAct -> CoT-SC; 49 for a game, as the ALFWorld notebook."""
        if self.max_steps is not None:
            return self.max_steps
        return task_type(task).step_limit(self.method)

    @property
    def sentences(self) -> int:
        """How many sentences a search shows: `n_first`, or the loop's default."""
        return LOOPS[self.loop] if self.n_first is None else self.n_first

    @property
    def cot_samples(self) -> int:
        """CoT-SC's samples a question: `samples`, or COT_SAMPLES where it is left out."""
        return given_or(self.samples, COT_SAMPLES)

    # A count left out (None) is the method's own (`given_or`), so that a value given equal to one method's default
    # still means what it says for another (--trials 7 for programs' reflexion; --max-tokens 100 for an
    # implementation). The program methods' own are config.choices' PROGRAM_TOKENS, PROGRAM_ITERATIONS, PROGRAM_LATS.

    @property
    def step_tokens(self) -> int:
        """A model call's token limit over questions and games: `max_tokens`, or a step's MAX_TOKENS."""
        return given_or(self.max_tokens, MAX_TOKENS)

    @property
    def question_trials(self) -> int:
        """A question's (or a game's) Reflexion trials: `trials`, or TRIALS."""
        return given_or(self.trials, TRIALS)

    @property
    def step_iterations(self) -> int:
        """LATS's iterations over ReAct steps: `iterations`, or LATS_ITERATIONS."""
        return given_or(self.iterations, LATS_ITERATIONS)

    @property
    def step_lats_temperature(self) -> float:
        """LATS's temperature over ReAct steps: `lats_temperature`, or LATS_TEMPERATURE."""
        return given_or(self.lats_temperature, LATS_TEMPERATURE)

    def to_dict(self) -> dict:
        """Every setting by name, JSON- and TOML-ready; `Settings(**d)` reads it back."""
        return {key: getattr(self, key) for key in KEYS}

    @property
    def where(self) -> str:
        """How an error names these settings: nothing here, "variant NAME: " for a comparison's variant."""
        return ""


_DECLARED = {f.name: f.type for f in fields(Settings)}
_DEFAULTS = {f.name: f.default for f in fields(Settings)}
KEYS = tuple(_DECLARED)
# The settings that name a file (a notebook's or Python file's `#NAME` after it), in their order.
PATHS = tuple(f.name for f in fields(Settings) if f.metadata.get("file"))
REFLEXION_KEYS = KEYS[KEYS.index("trials") : KEYS.index("reflect_max_tokens") + 1]
LATS_KEYS = KEYS[KEYS.index("lats_samples") : KEYS.index("value_prompt") + 1]
REFLECT_KEYS = KEYS[KEYS.index("reflect_prompt") : KEYS.index("reflect_max_tokens") + 1]  # the reflection call's
# The settings of the questions and of how they are sent: a comparison's variants share them.
SHARED = KEYS[KEYS.index("data") :]
VARIANT_KEYS = KEYS[: KEYS.index("data")]


def given_or(value, otherwise):
    """A count as given, or the method's own `otherwise` where it is left out (None): a value given equal to another
    method's default (--trials 7, --max-tokens 100 for programs) means what it says."""
    return otherwise if value is None else value


def defaults(key: str) -> object:
    """A setting's default."""
    return _DEFAULTS[key]


def option(key: str) -> str:
    """The command-line option of a setting: `--max-steps` for max_steps."""
    return OPTIONS.get(key, "--" + key.replace("_", "-"))


def _kinds(key: str) -> tuple[type, ...]:
    """The types a setting takes, None's type included when it may be None."""
    declared = _DECLARED[key]
    if get_origin(declared) in (Union, types.UnionType):
        return get_args(declared)
    return (declared,)


_KIND_NAMES = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}


def kind_text(key: str) -> str:
    """What a setting takes, in words: "a whole number or nothing"."""
    kinds = _kinds(key)
    words = [_KIND_NAMES[k] for k in kinds if k is not type(None)]
    return " or ".join(words) + (" (or left out)" if type(None) in kinds else "")


def type_problem(key: str, value: object) -> str | None:
    """What is wrong with the type of one setting's value, or None."""
    kinds = _kinds(key)
    if value is None and type(None) in kinds:
        return None
    if isinstance(value, bool):
        ok = bool in kinds
    elif isinstance(value, int):
        ok = int in kinds or float in kinds
    else:
        ok = any(isinstance(value, k) for k in kinds if k not in (type(None), bool, int))
    return None if ok else f"{key}={value!r} must be {kind_text(key)}"


def value_problem(key: str, value: object) -> str | None:
    """What is wrong with one setting's value alone (its type, its word, its range), or None."""
    problem = type_problem(key, value)
    if problem or value is None:
        return problem
    if key == "method" and value not in METHODS:
        return f"method={value!r}; the methods are {', '.join(METHODS)}"
    if key == "grammar" and value not in MODES:
        return f"grammar={value!r}; use off, {', '.join(MODES)}"
    if key == "loop" and value not in LOOPS:
        return f"loop={value!r}; the loops are {', '.join(LOOPS)}"
    for name, allowed in (("strategy", STRATEGIES), ("evaluator", EVALUATORS), ("context", CONTEXTS)):
        if key == name and value not in allowed:
            return f"{key}={value!r} ({option(key)}); use one of {', '.join(allowed)}"
    if key == "repeats" and value not in REPEATS:
        return f"repeats={value!r}; use one of {', '.join(REPEATS)}"
    if key == "threads" and (isinstance(value, str) or value < 1):
        return (
            None if value == "auto" else f"threads={value!r} (--threads) must be a whole number of 1 or more, or auto"
        )
    if key in _LEAST and value < _LEAST[key]:
        return f"{key}={value} ({option(key)}) must be at least {_LEAST[key]}"
    if key in _MOST and value > _MOST[key][0]:
        return f"{key}={value} ({option(key)}) must be at most {_MOST[key][0]}: {_MOST[key][1]}"
    if key == "seed" and value > SEED_MAX:
        return f"seed={value} (--seed) must be at most {SEED_MAX}"
    if key in ("temperature", "sample_temperature", "lats_temperature") and not (math.isfinite(value) and value >= 0):
        return f"{key}={value} must be a finite number of at least 0 (0 is greedy)"
    if key in ("timeout", "verb_timeout") and not (math.isfinite(value) and value > 0):
        return f"{key}={value} ({option(key)}) must be a finite number of seconds above 0"
    if key == "threads" and value > THREADS_MAX:
        return (
            f"threads={value} (--threads) must be at most {THREADS_MAX}, llama.cpp's most (GGML_MAX_N_THREADS); a "
            "thread a core is what runs fastest"
        )
    if key == "actor_cpus" and not (math.isfinite(value) and value > 0):
        return f"actor_cpus={value} (--actor-cpus) must be a finite number above 0, such as 1 or 0.5"
    if key == "ray":
        return ray_address_problem(value)
    if key == "cache" and not value.strip():
        return "cache='' (--cache) names no file; give one, such as calls.sqlite, or leave it out"
    if key == "shard" and _shard(value) is None:
        return f"shard={value!r} (--shard) must be K/N with 1 <= K <= N, as in 2/3"
    return None


def env_problem(env: str, method: str) -> str | None:
    """What stops an `--env` import path from running with this method, or None (a loop: `runs.setup.game_problem`)."""
    problem = module_problem(env)
    if problem:
        return problem
    if not acts(method):
        return f"--env gives the actions an episode takes, and method {method} takes none; drop --env"
    return None


def _shard(value: str) -> tuple[int, int] | None:
    k, slash, n = value.partition("/")
    k, n = whole_number(k), whole_number(n)
    if not slash or k is None or n is None:
        return None
    return (k, n) if 1 <= k <= n else None


def parse_shard(value: str) -> tuple[int, int]:
    """`K/N` as (K, N); a bad value is a DataError."""
    found = _shard(value)
    if found is None:
        raise DataError(value_problem("shard", value))
    return found


def in_shard(items: list, shard: tuple[int, int] | None) -> list:
    """The K-th of N parts of `items`: every N-th one from the K-th (1, N+1, 2N+1, ... for K=1), so that the
    parts are the same on every machine, hold each item once, and differ in size by one at most."""
    if shard is None:
        return list(items)
    k, n = shard
    return list(items)[k - 1 :: n]


def parse_spec(spec: str, where: str, keys: tuple[str, ...] = KEYS) -> dict:
    """`key=value,key=value` (as `--variant` and `--base` take it) -> setting values of their types."""
    values = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, equals, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not equals or key not in keys:
            raise DataError(f"{where}: {item!r} is not key=value with a known key; the keys are {', '.join(keys)}")
        values[key] = _convert(key, value.strip(), where)
    return values


def _convert(key: str, value: str, where: str):
    kinds = _kinds(key)
    kind = next((t for t in (bool, int, float) if t in kinds), str)
    if key == "grammar" and value in ("off", "none", ""):
        return None
    if key == "threads" and value == "auto":
        return value
    if kind is bool:
        if value.lower() not in ("true", "false", "yes", "no", "1", "0"):
            raise DataError(f"{where}: {key}={value!r} is not true or false")
        return value.lower() in ("true", "yes", "1")
    try:
        return kind(value)
    except ValueError:
        raise DataError(f"{where}: {key}={value!r} is not {'a whole number' if kind is int else 'a number'}") from None


def ray_address_problem(value: str) -> str | None:
    """What is wrong with a `--ray-address` (local, auto, HOST:PORT or ray://HOST:PORT), or None."""
    if value in ("local", "auto"):
        return None
    host, colon, port = value.removeprefix("ray://").rpartition(":")
    if not colon or not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
        return (
            f"ray={value!r} (--ray-address) is not a cluster's address: give HOST:PORT, as `ray status` prints it "
            "(such as 10.0.0.5:6379), auto for the one RAY_ADDRESS names, or --ray to start a Ray for the run"
        )
    return None
