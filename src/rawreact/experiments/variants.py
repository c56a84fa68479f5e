"""Variants: a comparison's runs, each a `Settings` value with a name, from `--variant` specs or the
built-in ablations."""

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from rawreact.agents.grammar import Grammar
from rawreact.agents.prompts import Prompt, read_exemplars, shipped
from rawreact.config.choices import LOOPS, PAPER, REASONING, REFLEXION, REPEATS, STRATEGIES, first_method, loop_problem
from rawreact.config.settings import VARIANT_KEYS, Settings, parse_spec
from rawreact.core.errors import DataError
from rawreact.core.tasks import QA
from rawreact.runs.setup import (
    backoff_prompt_of,
    collection_of,
    envs_of,
    grammar_of,
    manifest_config,
    prompt_of,
    solve_options,
)
from rawreact.tasks.collection import Collection, Question

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


@dataclass(frozen=True)
class Variant(Settings):
    """One way to run the questions in a comparison: a name (it names the run file) and its settings."""

    name: str

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise DataError(f"variant name {self.name!r}: use letters, digits and . _ + - (it names the run file)")
        super().__post_init__()

    @property
    def where(self) -> str:
        return "" if self.name == "run" else f"variant {self.name}: "

    @property
    def settings(self) -> Settings:
        """The settings alone, without the name."""
        return Settings(**self.to_dict())

    def envs(self, collection: Collection) -> Callable[[Question], object]:
        """The environment of each question (`envs_of`)."""
        return envs_of(self, collection)

    def collection(self, collection: Collection) -> Collection:
        """The questions over this variant's passages (`collection_of`)."""
        return collection_of(self, collection)

    def load_prompt(self, task: str = QA.name) -> Prompt:
        """The prompt this variant sends (`prompt_of`)."""
        return prompt_of(self, task)

    def load_backoff_prompt(self, task: str = QA.name) -> Prompt | None:
        """The prompt of a back-off's second part (`backoff_prompt_of`)."""
        return backoff_prompt_of(self, task)

    def load_grammar(self) -> Grammar | None:
        """The grammar this variant applies (`grammar_of`)."""
        return grammar_of(self)

    def solve_options(self, grammar: Grammar | None, backoff: Prompt | None, task: str = QA.name) -> dict:
        """The keyword arguments of `solve` (`solve_options`)."""
        return solve_options(self, grammar, backoff, task)

    def config(
        self, collection: Collection, prompt: Prompt, grammar: Grammar | None, backoff: Prompt | None = None, **run
    ) -> dict:
        """The manifest config of this variant's run file (`manifest_config`)."""
        return manifest_config(self, collection, prompt, grammar, backoff, **run)


ABLATIONS = ("exemplars", "orders", "instructions", "grammar", "methods", "loops", "repeats", "reflexion")


def parse_variant(text: str, base: Variant | None = None) -> Variant:
    """`NAME=key=value,key=value` (as `--variant` takes it) -> a Variant built on `base`."""
    name, equals, spec = text.partition("=")
    if not equals:
        raise DataError(f"--variant {text!r}: write NAME=SPEC, as in k3=k=3,grammar=step (SPEC may be empty)")
    return replace(base or Variant(name), name=name, **parse_spec(spec, f"--variant {text!r}", VARIANT_KEYS))


# What the methods that only reason cannot take: a grammar and the guardrails watch actions.
_ONLY_ACTING = {"grammar": None, "grammar_file": None, "repeats": "off", "budget": None}


def ablation(kind: str, base: Variant, *, orders: int = 3, task: str = QA.name) -> list[Variant]:
    """The built-in ablations, on top of `base`: exemplars (k = 0..N), orders (the file's order and
    `orders` shuffles), instructions (every prompts/instruction*.txt), grammar (off, step, titles),
    methods (the paper's seven, PAPER, each with its shipped prompts), loops (the tolerant loop and
    the reference's; each shows its own default number of sentences unless `base` sets n_first),
    repeats (the repeat policies off, note and stop), reflexion (Reflexion's four strategies, on `base`'s
    Reflexion method, react-reflexion unless it names cot-reflexion). `task` ("qa" or "fever") picks the shipped
    exemplars and instructions that the exemplars and instructions ablations count.
    """
    if kind == "exemplars":
        count = len(read_exemplars(base.prompt, first_method(base.method), task))
        return [replace(base, name=f"k{k}", k=k) for k in range(count + 1)]
    if kind == "orders":
        return [replace(base, name="file-order", order=None)] + [
            replace(base, name=f"order{s}", order=s) for s in range(1, orders + 1)
        ]
    if kind == "instructions":
        # The default first, so it is the base of the differences.
        default = shipped("react", task, "instruction.txt")
        found = sorted(default.parent.glob("instruction*.txt"), key=lambda path: (path != default, path.name))
        return [replace(base, name=path.stem, instruction=str(path)) for path in found]
    if kind == "grammar":
        return [replace(base, name=f"grammar-{mode or 'off'}", grammar=mode) for mode in (None, "step", "titles")]
    if kind == "methods":  # each method with its shipped prompts; a grammar stays on the methods that act
        unset_prompt = dict.fromkeys(("prompt", "key", "instruction", "k", "order"))
        variants = []
        for m in PAPER:
            # The reference loop stays on the methods it can run, and a grammar on those that act.
            loop = base.loop if loop_problem(base.loop, m, False) is None else "tolerant"
            unset = _ONLY_ACTING if m in REASONING else {}
            variants.append(replace(base, name=m, method=m, loop=loop, **unset_prompt, **unset))
        return variants
    if kind == "loops":
        return [replace(base, name=loop, loop=loop) for loop in LOOPS]
    if kind == "repeats":  # the reference loop cannot add a note, so it compares off and stop
        policies = [p for p in REPEATS if base.loop == "tolerant" or p != "note"]
        return [replace(base, name=f"repeats-{policy}", repeats=policy) for policy in policies]
    if kind == "reflexion":
        method = base.method if base.method in REFLEXION else "react-reflexion"
        return [replace(base, name=strategy, method=method, strategy=strategy) for strategy in STRATEGIES]
    raise DataError(f"unknown ablation {kind!r}; the ablations are {', '.join(ABLATIONS)}")
