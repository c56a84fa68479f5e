"""Methods that write programs: `simple` (one implementation a problem, as Reflexion's simple strategy) and
`reflexion` (the model writes its own tests, the implementation is tried on them, and each failure is reflected on
before the next implementation, up to a set number of implementations; the last is judged by the hidden tests, as
Reflexion's programming runs judge it).

A completion model continues the problem's prompt (its signature and docstring) after rawreact's exemplars
(prompts/programs/simple.txt), and the call stops where a function's body ends (STOPS); `program_of` makes the
program from what it wrote, tolerating what small models write instead of a bare body: a whole function, a
markdown fence, prose after the code. An episode is a `Trajectory` of the "program" loop whose steps are the
implementations: each step's action text is the program, its observation what its tests said, its thought the
reflection that came before it; the outcome's `program` field holds the model's tests and the hidden verdict.
"""

import ast
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rawreact.agents.record import Step, Trajectory
from rawreact.core.actions import Action
from rawreact.core.errors import PromptError
from rawreact.core.resources import resource
from rawreact.core.text import commented
from rawreact.environments.programs import ProgramEnv, feedback
from rawreact.models.base import Completion, Model

# Where a function's body ends: another top-level definition, statement or comment (the stops HumanEval's Codex
# runs used), or the close of a markdown fence.
STOPS = ["\ndef ", "\nclass ", "\nif ", "\nprint(", "\n#", "\n```", "\nassert "]
TEST_STOPS = ["\n\n", "\ndef ", "\nclass ", "\n#", "\n```"]
# A prompt that names {prompt} (a chat template's, say) asks for the whole function in a markdown fence after it:
# the call stops where the fence closes, or where the chat's turn ends.
TEMPLATE_STOPS = ["\n```", "<|im_end|>", "<|endoftext|>"]
MAX_TESTS = 6  # the model's own tests kept a problem (Reflexion's programming runs sample up to this many)
PROGRAM_TOKENS, TEST_TOKENS, REFLECT_TOKENS = 512, 256, 200
NAMES = ("simple", "tests", "reflect", "improve")  # the prompt files, prompts/programs/NAME.txt


@dataclass(frozen=True)
class ProgramPrompts:
    """The texts the program methods send: the exemplars an implementation follows (`simple`), and the templates of
    the tests, the reflection and the improved implementation (their `{...}` fields filled strictly)."""

    simple: str
    tests: str
    reflect: str
    improve: str
    source: str = "prompts/programs/"

    @property
    def templated(self) -> bool:
        """Whether the problem goes where the prompts name it (`{prompt}`: a chat template's prompts) and the model
        writes the whole function, rather than after the exemplars, for the model to continue its body."""
        return "{prompt}" in self.simple

    def implement(self, problem: str) -> str:
        """The prompt of a first implementation."""
        return fill(self.simple, "simple", prompt=problem) if self.templated else self.simple + problem

    def improve_after(self, problem: str, program: str, shown: str, reflection: str) -> str:
        """The prompt of an implementation after a failed one: the earlier program, what its tests said and the
        reflection (as comments before the problem, for a model that continues the body)."""
        if self.templated:
            return fill(self.improve, "improve", prompt=problem, program=program.rstrip("\n"), feedback=shown,
                        reflection=reflection)  # fmt: skip
        earlier = fill(self.improve, "improve", program=commented(program), feedback=commented(shown),
                       reflection=commented(reflection))  # fmt: skip
        return self.simple + earlier + problem

    @property
    def stops(self) -> list[str]:
        """Where an implementation's call stops."""
        return TEMPLATE_STOPS if self.templated else STOPS

    @classmethod
    def load(cls, folder: str | Path | None = None) -> "ProgramPrompts":
        """The four prompt files of a folder (rawreact's own by default)."""
        texts = {}
        for name in NAMES:
            path = Path(folder, f"{name}.txt") if folder else resource("prompts", f"programs/{name}.txt")
            try:
                texts[name] = path.read_text(encoding="utf-8-sig")
            except OSError as error:
                raise PromptError(
                    f"{path}: cannot read the program prompt: {error.strerror}; a folder of program prompts holds "
                    f"{', '.join(n + '.txt' for n in NAMES)}"
                ) from None
        made = cls(**texts, source=str(folder) if folder else "prompts/programs/")
        for name in FIELDS:  # a field no call fills is refused now, not at the first problem
            fill(getattr(made, name), name)
        if made.templated != ("{prompt}" in made.improve):
            raise PromptError(
                f"{made.source}: simple.txt and improve.txt name {{prompt}} both (a template the problem goes in) or "
                "neither (the problem follows them)"
            )
        return made


FIELDS = {"simple": ("prompt",), "tests": ("prompt", "entry_point"), "reflect": ("program", "feedback"),
          "improve": ("prompt", "program", "feedback", "reflection")}  # fmt: skip


def fill(template: str, name: str, **values: str) -> str:
    """A template with its fields filled, each `{field}` it names being one it may name (a stray brace stays)."""
    named = set(re.findall(r"\{([a-z_]+)\}", template))
    unknown = named - set(FIELDS[name])
    if unknown:
        raise PromptError(f"the {name} prompt names {{{sorted(unknown)[0]}}}; it may name {', '.join(FIELDS[name])}")
    if not values:
        return template
    # One pass, so that a value holding a field's name (a docstring that says `{program}`) stays as it is.
    pattern = "|".join(re.escape("{" + key + "}") for key in values)
    return re.sub(pattern, lambda found: values[found.group(0)[1:-1]], template)


def program_of(prompt: str, completion: str, entry_point: str) -> str:
    """The program a completion makes: the problem's prompt and the body written after it; or, where the model
    wrote the whole function (in a markdown fence or not), that function after the prompt's imports. Prose after
    the code is cut where the code stops parsing."""
    text = completion
    fence = re.search(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|$)", text, re.S)
    if fence:
        text = fence.group(1)
    if re.search(rf"^def {re.escape(entry_point)}\s*\(", text, re.M):
        imports = [line for line in prompt.splitlines() if re.match(r"(import|from)\s", line)]
        return _parsed("\n".join(imports) + "\n\n" + text.strip("\n") + "\n")
    lines = text.split("\n")
    for i, line in enumerate(lines[1:], 1):  # a body is indented: the first line back at column 0 ends it
        if line.strip() and not line[0].isspace():
            lines = lines[:i]
            break
    return _parsed(prompt + "\n".join(lines).rstrip() + "\n")


def _parsed(program: str) -> str:
    """The longest start of the program, line by line, that parses; the program itself where none does."""
    lines = program.split("\n")
    for end in range(len(lines), max(0, len(lines) - 40), -1):
        candidate = "\n".join(lines[:end]).rstrip() + "\n"
        if _parses(candidate):
            return candidate
    return program


def asserts_of(text: str, entry_point: str) -> list[str]:
    """The model's tests: the lines of what it wrote that assert something of the function, each once."""
    found = [line.strip() for line in text.split("\n") if line.strip().startswith("assert ") and entry_point in line]
    return [test for test in dict.fromkeys(found) if _parses(test)][:MAX_TESTS]


def _parses(code: str) -> bool:
    """Whether the code parses (a test the token limit cut does not)."""
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def simple(env: ProgramEnv, model: Model, prompts: ProgramPrompts, *, max_tokens: int = PROGRAM_TOKENS,
           on_step: Callable[[Step], None] | None = None) -> tuple[Trajectory, dict]:  # fmt: skip
    """One implementation, judged by the hidden tests."""
    trajectory = _trajectory(env, prompts)
    started = time.perf_counter()
    call = model.complete(prompts.implement(env.prompt), stop=prompts.stops, max_tokens=max_tokens)
    program = program_of(env.prompt, call.text, env.entry_point)
    return _judged(env, trajectory, program, [call], started, on_step, tests=None)


def reflexion(env: ProgramEnv, model: Model, prompts: ProgramPrompts, *, iterations: int = 5,
              max_tokens: int = PROGRAM_TOKENS, on_step: Callable[[Step], None] | None = None,
              ) -> tuple[Trajectory, dict]:  # fmt: skip
    """Up to `iterations` implementations: the model's own tests first, then an implementation tried on them;
    while some fail and implementations remain, a reflection on the failure and an improved implementation. The
    last implementation (the first to pass its own tests, or the last made) is judged by the hidden tests."""
    trajectory = _trajectory(env, prompts)
    started = time.perf_counter()
    asked = fill(prompts.tests, "tests", prompt=env.prompt, entry_point=env.entry_point)
    test_call = model.complete(asked, stop=TEMPLATE_STOPS if prompts.templated else TEST_STOPS, max_tokens=TEST_TOKENS)
    tests = asserts_of(test_call.text, env.entry_point)
    calls: list[Completion] = [test_call]
    reflection, program, shown = "", "", ""
    for i in range(1, iterations + 1):
        if i == 1:
            prompt = prompts.implement(env.prompt)
        else:
            asked = fill(prompts.reflect, "reflect", program=program.rstrip("\n"), feedback=shown)
            reflect_call = model.complete(asked, stop=["\n\n", *TEMPLATE_STOPS[1:]], max_tokens=REFLECT_TOKENS)
            calls.append(reflect_call)
            reflection = reflect_call.text.strip()
            prompt = prompts.improve_after(env.prompt, program, shown, reflection)
        call = model.complete(prompt, stop=prompts.stops, max_tokens=max_tokens)
        calls.append(call)
        program = program_of(env.prompt, call.text, env.entry_point)
        tried, setup = env.try_tests(program, tests)
        shown = feedback(tried, setup)  # what its tests said: this step's observation, and the next prompts'
        if all(t.passed for t in tried) or i == iterations:  # its own tests held (or it wrote none), or the last
            return _judged(env, trajectory, program, calls, started, on_step, tests, tried, shown, reflection)
        step = Step(i, reflection or None, Action("program", env.entry_point), program, shown, calls,
                    seconds=time.perf_counter() - started)  # fmt: skip
        trajectory.steps.append(step)
        if on_step is not None:
            on_step(step)
        calls, started = [], time.perf_counter()
    raise AssertionError("unreachable: the last implementation is judged")


def _trajectory(env: ProgramEnv, prompts: ProgramPrompts) -> Trajectory:
    return Trajectory(env.prompt, prompts.simple, loop="program", header="Problem")


def _judged(env, trajectory: Trajectory, program: str, calls: list[Completion], started: float, on_step,
            tests: list[str] | None, tried=(), said: str = "", reflection: str = "",
            ) -> tuple[Trajectory, dict]:  # fmt: skip
    """The last implementation's step, judged by the hidden tests (after what its own tests `said`); the trajectory
    ended and the program record."""
    ran = env.judge(program)
    verdict = "Hidden tests: passed" if ran.passed else f"Hidden tests: failed ({ran.reason})"
    shown = verdict if tests is None else said + "\n\n" + verdict
    step = Step(len(trajectory.steps) + 1, reflection or None, Action("program", env.entry_point), program, shown,
                calls, seconds=time.perf_counter() - started)  # fmt: skip
    trajectory.steps.append(step)
    if on_step is not None:
        on_step(step)
    trajectory.answer, trajectory.ended = program, "passed" if ran.passed else "failed"
    record = {"entry_point": env.entry_point, "isolation": env.isolation,
              "hidden": {"passed": ran.passed, "reason": ran.reason, "seconds": round(ran.seconds, 3),
                         "stderr": "" if ran.passed else ran.stderr[-500:]}}  # fmt: skip
    if tests is not None:
        record |= {"tests": tests, "tried": [t.to_dict() for t in tried]}
    return trajectory, record
