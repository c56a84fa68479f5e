"""The programming runs of Reflexion (`programming_runs/`: `simple.py`, `reflexion.py`) and LATS (`programming/`:
`mcts.py`), call for call (`rawreact run humaneval --reference DIR`, DIR a clone of either repository).

Their prompts are read from the clone's `generators/py_generate.py` (nothing of them ships here) and put together as
its `generators/generator_utils.py` does, in its chat branch (the messages rendered as ChatML turns, the layout of
the model's chat template: `--prompt chat`, for Qwen's) or its completion branch (the text sent as it is, as to
`text-davinci`). Each call has its temperature (an implementation 0.0 in Reflexion and 0.8 in LATS, a chat's tests
and reflections 0.2, a completion's 0.0) and its 1,024 tokens; the code is read from a reply by the
repositories' `parse_code_block`, the tests by their `parse_tests`, and tried as their `PyExecutor.execute`
tries them (`ProgramEnv.try_reference`), its feedback in their words. docs/reference.md lists what cannot be the
same (P1 to P9).

One room: the two repositories' runs share their generators and executor (`Caller`, the parsers, the feedback), each
run is read against its repository's file beside the other's, and the differences between them (the tests' chat
turns, the temperatures, the accumulated context) are the point of keeping them together.
"""

import hashlib
import math
import random
import re
import time
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path

from rawreact.agents import prompts
from rawreact.agents.programs import parses
from rawreact.agents.prompts import python_strings
from rawreact.agents.record import Step, Trajectory
from rawreact.core.actions import Action
from rawreact.core.errors import PromptError
from rawreact.environments.programs import ProgramEnv, Tried, hidden_said
from rawreact.environments.sandbox import Ran
from rawreact.models.base import Completion, Model

STRINGS = (
    "PY_SIMPLE_COMPLETION_INSTRUCTION", "PY_REFLEXION_COMPLETION_INSTRUCTION",
    "PY_SELF_REFLECTION_COMPLETION_INSTRUCTION", "USE_PYTHON_CODEBLOCK_INSTRUCTION", "PY_SIMPLE_CHAT_INSTRUCTION",
    "PY_REFLEXION_CHAT_INSTRUCTION", "PY_REFLEXION_FEW_SHOT_ADD", "PY_SELF_REFLECTION_CHAT_INSTRUCTION",
    "PY_SELF_REFLECTION_FEW_SHOT", "PY_TEST_GENERATION_FEW_SHOT", "PY_TEST_GENERATION_COMPLETION_INSTRUCTION",
    "PY_TEST_GENERATION_CHAT_INSTRUCTION",
)  # fmt: skip
TOKENS = 1024  # every call's max_tokens (the model classes' default)
CHAT_TEMPERATURE = 0.2  # generate_chat's default: a chat's tests and reflections
TEMPERATURES = {"reflexion": 0.0, "lats": 0.8}  # each repository's PyGenerator.func_impl default
CHAT_STOPS = ["<|im_end|>", "<|endoftext|>"]  # a chat turn's end: where a chat API's reply ends
ASKED_AGAIN = 8  # LATS asks again for ever while a reply holds no code (`while ... is None`); here 8 times (P8)
# The number of internal tests and iterations each repository's run script gives (run_reflexion.sh: max_iters 2,
# `internal_tests(..., 1)` in reflexion.py; run_lats_gpt4.sh: max_iters 8, number_of_tests 2; mcts.py's n=5).
DEFAULTS = {"reflexion": {"iterations": 2, "tests": 1}, "lats": {"iterations": 8, "tests": 2, "children": 5}}


@dataclass(frozen=True)
class ProgramReference:
    """A repository's prompts (its `py_generate.py`'s strings), which repository (`repo`: reflexion or lats) and
    which branch of its generators (`chat`: the messages as ChatML turns; else the completion prompts)."""

    path: str
    repo: str
    chat: bool
    strings: dict = field(repr=False, compare=False, default_factory=dict)
    sha256: str = ""  # of the file's bytes the strings were read from

    @classmethod
    def load(cls, path: str | Path, *, chat: bool) -> "ProgramReference":
        """The prompts of the `py_generate.py` at `path` (which repository: from where it lies in its clone), read
        once while the file is unchanged (a run's options and its manifest both ask for them)."""
        stat = Path(path).stat()
        return _loaded(str(path), chat, stat.st_mtime_ns, stat.st_size)

    @property
    def source(self) -> str:
        return reference_source(self.path, chat=self.chat)

    def __getitem__(self, name: str) -> str:
        return self.strings[name]


@lru_cache(maxsize=8)
def _loaded(path: str, chat: bool, *stamp: int) -> ProgramReference:
    """`ProgramReference.load`, by the file's path and its modification time and size (`stamp`)."""
    repo = "lats" if Path(path).parent.parent.name == "programming" else "reflexion"
    data, text = prompts.read_bytes_and_text(Path(path))
    strings = python_strings(Path(path), STRINGS, text)
    few = strings["PY_TEST_GENERATION_FEW_SHOT"]
    made = strings["PY_TEST_GENERATION_COMPLETION_INSTRUCTION"]  # an f-string around the tests' examples
    if "{PY_TEST_GENERATION_FEW_SHOT}" not in made:
        raise PromptError(f"{path}: PY_TEST_GENERATION_COMPLETION_INSTRUCTION no longer names its examples")
    strings["PY_TEST_GENERATION_COMPLETION_INSTRUCTION"] = made.replace("{PY_TEST_GENERATION_FEW_SHOT}", few)
    return ProgramReference(path, repo, chat, strings, hashlib.sha256(data).hexdigest())


def reference_source(path: str, *, chat: bool) -> str:
    """Where a reference run's prompts come from, as its header and manifest name them."""
    return f"{path} ({'chat messages as ChatML turns' if chat else 'completion prompts'})"


def chatml(messages: list[tuple[str, str]]) -> str:
    """Chat messages as a ChatML prompt for the assistant's next turn (Qwen2.5's template, given a system turn)."""
    return (
        "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in messages) + "<|im_start|>assistant\n"
    )


def add_code_block(code: str | None) -> str:
    """The repositories' `add_code_block(x, "python")`."""
    return f"```python\n{code}\n```"


def parse_code_block(text: str) -> str | None:
    """The repositories' `parse_code_block(x, "python")`: a python fence's code, a bare fence's, or the first
    function written (`parse_first_func`); None where there is none."""
    for pattern in (r"```python\n(.*?)\n```", r"```\n(.*?)\n```"):
        found = re.search(pattern, text, re.DOTALL)
        if found:
            return found.group(1)
    lines = text.split("\n")
    def_i, last_i, got_return = -1, 0, False
    for i, line in enumerate(lines):
        if line.startswith("def "):
            if def_i == -1:
                def_i = i
            else:
                break
        elif "return" in line and def_i != -1:
            got_return = True
        if line == "" and def_i != -1 and got_return:
            last_i = i
            break
    if last_i == 0:
        last_i = len(lines) - 1
    if def_i == -1:
        return None
    return "\n".join(lines[def_i : last_i + 1]).rstrip("[/PYTHON]")


def parse_tests(text: str) -> list[str]:
    """The repositories' `parse_tests` and `py_is_syntax_valid`: each line that holds `assert`, stripped, if it
    parses."""
    found = [line.strip() for line in text.splitlines() if "assert" in line]
    return [test for test in found if parses(test)]


class Caller:
    """The calls of one problem: each through the run's model, greedy at temperature 0 and one seeded sample above
    it (the seeds counting up from the run's), every call kept for the step it belongs to."""

    def __init__(self, model: Model, reference: ProgramReference, seed: int, rng: random.Random) -> None:
        self.model, self.ref, self.seed, self.rng = model, reference, seed, rng
        self.calls: list[Completion] = []

    def send(self, prompt: str, temperature: float) -> str:
        stop = CHAT_STOPS if self.ref.chat else []
        if temperature == 0:
            call = self.model.complete(prompt, stop=stop, max_tokens=TOKENS)
        else:
            self.seed += 1
            call = self.model.sample(prompt, n=1, temperature=temperature, seed=self.seed, stop=stop,
                                     max_tokens=TOKENS)[0]  # fmt: skip
        self.calls.append(call)
        return call.text

    def taken(self) -> list[Completion]:
        calls, self.calls = self.calls, []
        return calls

    def chat_or(self, messages: list[tuple[str, str]], completion: str, temperature: float, chat_temperature: float):
        """A call of one of the generators' two branches: the messages (chat) or the completion prompt."""
        if self.ref.chat:
            return self.send(chatml(messages), chat_temperature)
        return self.send(completion, temperature)

    def internal_tests(self, signature: str, count: int) -> list[str]:
        """`generic_generate_internal_tests`: the tests written, those that parse, `count` of them drawn at random
        where there are more (P3)."""
        r = self.ref
        if r.repo == "lats":
            messages = [("system", f"{r['PY_TEST_GENERATION_CHAT_INSTRUCTION']}\n\n{r['PY_TEST_GENERATION_FEW_SHOT']}"),
                        ("user", f"[func signature]:\n{signature}\n\n[unit tests]:")]  # fmt: skip
        else:
            messages = [("system", r["PY_TEST_GENERATION_CHAT_INSTRUCTION"]),
                        ("user", f"{r['PY_TEST_GENERATION_FEW_SHOT']}\n\n[func signature]:\n{signature}\n\n"
                                 "[unit tests]:")]  # fmt: skip
        completion = f"{r['PY_TEST_GENERATION_COMPLETION_INSTRUCTION']}\n\nfunc signature:\n{signature}\nunit tests:"
        tests = parse_tests(self.chat_or(messages, completion, 0.0, CHAT_TEMPERATURE))
        return tests if count >= len(tests) else self.rng.sample(tests, count)

    def first(self, signature: str) -> str | None:
        """`func_impl(..., "simple")`: an implementation of the signature."""
        r, temperature = self.ref, TEMPERATURES[self.ref.repo]
        messages = [("system", f"{r['PY_SIMPLE_CHAT_INSTRUCTION']}\n{r['USE_PYTHON_CODEBLOCK_INSTRUCTION']}"),
                    ("user", signature)]  # fmt: skip
        completion = f"{r['PY_SIMPLE_COMPLETION_INSTRUCTION']}\n{signature}\n{r['USE_PYTHON_CODEBLOCK_INSTRUCTION']}"
        return parse_code_block(self.chat_or(messages, completion, temperature, temperature))

    def improved(self, signature: str, earlier: str, feedback: str, reflection: str) -> str | None:
        """`func_impl(..., "reflexion", ...)` (Reflexion's): an implementation after one, its tests and reflection."""
        r, temperature = self.ref, TEMPERATURES[self.ref.repo]
        messages = [("system", f"{r['PY_REFLEXION_CHAT_INSTRUCTION']}\n{r['USE_PYTHON_CODEBLOCK_INSTRUCTION']}"),
                    ("user", r["PY_REFLEXION_FEW_SHOT_ADD"]), ("assistant", add_code_block(earlier)),
                    ("user", f"[unit test results from previous impl]:\n{feedback}\n\n[reflection on previous impl]:"),
                    ("assistant", reflection), ("user", f"[improved impl]:\n{signature}")]  # fmt: skip
        completion = (f"{r['PY_REFLEXION_COMPLETION_INSTRUCTION']}\n{add_code_block(earlier)}\n\nunit tests:\n"
                      f"{feedback}\n\nhint:\n{reflection}\n\n# improved implementation\n{signature}\n"
                      f"{r['USE_PYTHON_CODEBLOCK_INSTRUCTION']}")  # fmt: skip
        return parse_code_block(self.chat_or(messages, completion, temperature, temperature))

    def accumulated(self, signature: str, earlier, feedbacks: list[str], reflections: list[str]) -> str | None:
        """`generate_with_accumulated_context` (LATS's expansion): the earlier implementations, feedback and
        reflections zipped together. mcts.py passes the node's solution, a string, as the implementations, so
        each is one character of it (P9), as there."""
        r, temperature = self.ref, TEMPERATURES[self.ref.repo]
        shown = list(zip(earlier, feedbacks, reflections, strict=False))  # zip stops at the shortest, as there
        messages = [("system", f"{r['PY_REFLEXION_CHAT_INSTRUCTION']}\n{r['USE_PYTHON_CODEBLOCK_INSTRUCTION']}"),
                    ("user", r["PY_REFLEXION_FEW_SHOT_ADD"])]  # fmt: skip
        for impl, said, reflection in shown:
            messages += [("assistant", add_code_block(impl)),
                         ("user", f"[unit test results from previous impl]:\n{said}\n\n[reflection on previous impl]:"
                                  f"\n{reflection}")]  # fmt: skip
        messages.append(("user", f"[improved impl]:\n{signature}"))
        context = "\n\n".join(
            f"[previous impl {i + 1}]:\n{add_code_block(impl)}\n[unit test results from previous impl {i + 1}]:\n"
            f"{said}\n[reflection on previous impl {i + 1}]:\n{reflection}"
            for i, (impl, said, reflection) in enumerate(shown)
        )
        completion = (f"{r['PY_REFLEXION_COMPLETION_INSTRUCTION']}\n{context}\n\n# improved implementation\n"
                      f"{signature}\n{r['USE_PYTHON_CODEBLOCK_INSTRUCTION']}")  # fmt: skip
        return parse_code_block(self.chat_or(messages, completion, temperature, temperature))

    def reflection(self, func: str | None, feedback: str) -> str:
        """`generic_generate_self_reflection`, with the repositories' examples."""
        r = self.ref
        messages = [("system", r["PY_SELF_REFLECTION_CHAT_INSTRUCTION"]),
                    ("user", f"{r['PY_SELF_REFLECTION_FEW_SHOT']}\n\n[function impl]:\n{add_code_block(func)}\n\n"
                             f"[unit test results]:\n{feedback}\n\n[self-reflection]:")]  # fmt: skip
        completion = (
            f"{r['PY_SELF_REFLECTION_COMPLETION_INSTRUCTION']}\n{add_code_block(func)}\n\n{feedback}\n\nExplanation:"
        )
        return self.chat_or(messages, completion, 0.0, CHAT_TEMPERATURE)


class _Episode:
    """What one problem's run keeps: its steps (each implementation tried), as rawreact's records hold them."""

    def __init__(self, env: ProgramEnv, caller: Caller, on_step, typing: str = "*") -> None:
        self.env, self.caller, self.on_step = env, caller, on_step
        self.typing = typing  # the names of `typing` the executor's namespace has when the hidden tests run
        self.trajectory = Trajectory(env.prompt, caller.ref.source, loop="program", header="Problem")
        self.tests: list[str] = []
        self.tried: list[Tried] = []
        self.since = time.perf_counter()
        self.verdicts: dict[str, Ran] = {}  # the hidden tests' verdict of each program judged, run once

    def step(self, program: str | None, said: str, reflection: str = "") -> None:
        now = time.perf_counter()
        step = Step(len(self.trajectory.steps) + 1, reflection or None, Action("program", self.env.entry_point),
                    program or "", said, self.caller.taken(), seconds=now - self.since)  # fmt: skip
        self.since = now
        self.trajectory.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)

    def tried_on(self, program: str | None) -> tuple[bool, str]:
        passing, said, self.tried = self.env.try_reference(program or "", self.tests)
        return passing, said

    def judged(self, program: str | None) -> bool:
        return self.verdict(program).passed

    def verdict(self, program: str | None) -> Ran:
        """The hidden tests on the program as the executors' `evaluate` runs them, once a program."""
        program = program or ""
        if program not in self.verdicts:
            self.verdicts[program] = self.env.judge_reference(program, self.typing)
        return self.verdicts[program]

    def ended(self, program: str | None, counted: bool, judged: int) -> tuple[Trajectory, dict]:
        """The trajectory ended by the hidden tests' verdict on the final program; the record says too whether the
        repository counts the problem solved (`counted`, P6) and how many times it ran the hidden tests."""
        ran = self.verdict(program)
        self.trajectory.answer, self.trajectory.ended = program or "", "passed" if ran.passed else "failed"
        if self.trajectory.steps:
            self.trajectory.steps[-1].observation += f"\n\n{hidden_said(ran)}"
        record = {"entry_point": self.env.entry_point, "isolation": self.env.isolation, "rules": "reference",
                  "hidden": {"passed": ran.passed, "reason": ran.reason, "seconds": round(ran.seconds, 3),
                             "stderr": "" if ran.passed else ran.stderr[-500:]},
                  "counted": counted, "hidden_runs": judged, "tests": self.tests,
                  "tried": [t.to_dict() for t in self.tried]}  # fmt: skip
        return self.trajectory, record


def simple(env: ProgramEnv, model: Model, reference: ProgramReference, *, seed: int = 0,
           on_step=None) -> tuple[Trajectory, dict]:  # fmt: skip
    """Reflexion's `run_simple` (pass@1): one implementation, judged by the hidden tests, in a namespace where no
    test has run, so of `typing` it has the executor module's own `List` alone."""
    caller = Caller(model, reference, seed, random.Random(seed))
    episode = _Episode(env, caller, on_step, typing="List")
    program = caller.first(env.prompt)
    episode.step(program, "(no tests: the simple strategy)")
    passed = episode.judged(program)
    return episode.ended(program, passed, 1)


def reflexion(env: ProgramEnv, model: Model, reference: ProgramReference, *, iterations: int = 2, tests: int = 1,
              seed: int = 0, on_step=None) -> tuple[Trajectory, dict]:  # fmt: skip
    """Reflexion's `run_reflexion` (pass@1; `max_iters` = `iterations`): its tests (`internal_tests(prompt, model,
    1)`), a first implementation; while its tests fail, a reflection and an improved implementation, the last or
    the first to pass its tests judged by the hidden tests. A first implementation that fails its tests with one
    iteration is never judged: the repository counts it failed."""
    caller = Caller(model, reference, seed, random.Random(seed))
    episode = _Episode(env, caller, on_step)
    episode.tests = caller.internal_tests(env.prompt, tests)
    program = _code(caller.first(env.prompt))
    passing, said = episode.tried_on(program)
    episode.step(program, said)
    if passing:
        return episode.ended(program, episode.judged(program), 1)
    counted, judged = False, 0
    for i in range(1, iterations):
        reflection = caller.reflection(program, said)
        program = _code(caller.improved(env.prompt, program, said, reflection))
        passing, said = episode.tried_on(program)
        episode.step(program, said, reflection)
        if passing or i == iterations - 1:
            counted, judged = episode.judged(program), 1
            break
    return episode.ended(program, counted, judged)


def _code(found: str | None) -> str:
    """A reply's code; Reflexion's `assert isinstance(cur_func_impl, str)` stops its run where there is none, and
    here the implementation is empty (P8)."""
    return "" if found is None else found


@dataclass(eq=False)
class Node:
    """mcts.py's `Node`: a solution, its feedback and reflection, its visits and value."""

    solution: str
    parent: "Node | None" = None
    children: list = field(default_factory=list)
    value: float = 0.0
    visits: int = 0
    reflection: str = ""
    test_feedback: str = ""

    def uct(self, weight: float = 1.0) -> float:
        if self.visits == 0:
            return self.value
        return self.value / self.visits + weight * math.sqrt(math.log(self.parent.visits) / self.visits)

    def best_child(self) -> "Node | None":
        return max(self.children, key=lambda child: child.uct()) if self.children else None

    def best_child_value(self) -> "Node | None":
        return max(self.children, key=lambda child: child.value) if self.children else None

    def update(self, reward: float) -> None:
        self.visits += 1
        self.value += reward


def gathered(node: Node | None) -> tuple[list[str], list[str]]:
    """mcts.py's `gather_context_from_tree`: the feedback and reflections of the node and its ancestors, each
    non-empty one, the root's first."""
    feedbacks, reflections = [], []
    while node:
        if node.test_feedback:
            feedbacks.append(node.test_feedback)
        if node.reflection:
            reflections.append(node.reflection)
        node = node.parent
    return feedbacks[::-1], reflections[::-1]


def internal_reward(feedback: str, tests: int) -> float:
    """mcts.py's reward of a child's tests: the lines between `Tested passed:` and `Tests failed:`, a share of the
    tests (a division by zero there when no test was kept; 0 here, P7)."""
    if "Tested passed:" not in feedback or tests == 0:
        return 0.0
    passed = feedback.split("Tests failed:")[0].split("Tested passed:")[1]
    return len([line for line in passed.splitlines() if line.strip() != ""]) / tests


def lats(env: ProgramEnv, model: Model, reference: ProgramReference, *, iterations: int = 8, tests: int = 2,
         children: int = 5, seed: int = 0, on_step=None) -> tuple[Trajectory, dict]:  # fmt: skip
    """LATS's `run_mcts` (`max_iters` = `iterations`, `number_of_tests` = `tests`, `n` = `children`), as written:
    tests drawn again at each iteration; a leaf chosen by UCT; `n` children made one after another, and after each,
    every child of the node tried again (and reflected on again where it fails), the hidden tests consulted for a
    child that passes its tests (or any at the last iteration) and the search ended when one passes them; the
    reward of the last child tried backed up from it. The problem is solved when the chosen solution passes the
    hidden tests, and counted solved by the repository, besides, when its first implementation passes its own
    tests (P6)."""
    caller = Caller(model, reference, seed, random.Random(seed))
    episode = _Episode(env, caller, on_step)
    episode.tests = caller.internal_tests(env.prompt, tests)
    first = _asked_again(lambda: caller.first(env.prompt))
    passing, said = episode.tried_on(first)
    episode.step(first, said)
    if passing:  # mcts.py adds 1 to its count of successes here, whatever the hidden tests say
        episode.judged(first)
        return episode.ended(first, True, 1)
    root = Node(first, reflection=caller.reflection(first, said), test_feedback=said)
    solved, solution, judged, newest = False, None, 0, first
    for cur_iter in range(iterations):
        episode.tests = caller.internal_tests(env.prompt, tests)
        node = root
        while node.children:
            node = node.best_child()
        for _ in range(children):
            feedbacks, reflections = gathered(node)
            newest = _asked_again(partial(caller.accumulated, env.prompt, node.solution, feedbacks, reflections))
            node.children.append(Node(newest, parent=node))
            reward_real, reward_internal, child = 0, 0.0, node.children[-1]
            for child in node.children:
                passing, said = episode.tried_on(child.solution)
                reflection = "" if passing else caller.reflection(child.solution, said)
                child.reflection, child.test_feedback = reflection, said
                episode.step(child.solution, said, reflection)
                reward_internal = internal_reward(said, len(episode.tests))
                if passing or cur_iter == iterations - 1:
                    judged += 1
                    if episode.judged(child.solution):
                        solution, solved, reward_real = child.solution, True, 1
                    break
            if solved:
                break
            reward = reward_internal + reward_real
            child.update(reward)
            while child.parent:
                child = child.parent
                child.update(reward)
        if solved:
            break
    best = solution if solved else root.best_child_value().solution
    return episode.ended(best, episode.judged(best), judged + 1)


def _asked_again(make) -> str:
    """A reply's code, asked for again while there is none (mcts.py: for ever; here ASKED_AGAIN times, then an
    empty implementation, P8)."""
    for _ in range(ASKED_AGAIN):
        found = make()
        if found is not None:
            return found
    return ""
