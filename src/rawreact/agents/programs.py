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
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rawreact.agents.record import Step, Trajectory
from rawreact.core.actions import Action
from rawreact.core.errors import PromptError
from rawreact.core.files import read_whole
from rawreact.core.resources import resource
from rawreact.core.text import UNPARSEABLE, commented
from rawreact.environments.programs import ProgramEnv, feedback, hidden_said
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
                texts[name] = read_whole(path).decode("utf-8-sig")
            except (OSError, UnicodeDecodeError) as error:
                said = getattr(error, "strerror", None) or "not UTF-8 text"
                raise PromptError(f"{path}: cannot read the program prompt: {said}; a folder of program prompts "
                                  f"holds {', '.join(n + '.txt' for n in NAMES)}") from None  # fmt: skip
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
    wrote the whole function (in a markdown fence or not), that function after the prompt's imports and the
    helpers the prompt defines (HumanEval judges prompt + completion, so a reply may call them). Prose after the
    code is cut where the code stops parsing."""
    text = completion
    fence = re.search(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|$)", text, re.S)
    if fence:
        text = fence.group(1)
    if re.search(rf"^def {re.escape(entry_point)}\s*\(", text, re.M):
        imports = [line for line in prompt.splitlines() if re.match(r"(import|from)\s", line)]
        helpers = _helpers(prompt, entry_point)
        return _parsed("\n".join(imports) + "\n\n" + (helpers + "\n\n" if helpers else "") + text.strip("\n") + "\n")
    lines = text.split("\n")
    for i, line in enumerate(lines[1:], 1):  # a body is indented: the first line back at column 0 ends it
        if line.strip() and not line[0].isspace():
            lines = lines[:i]
            break
    return _parsed(prompt + "\n".join(lines).rstrip() + "\n")


def _helpers(prompt: str, entry_point: str) -> str:
    """The prompt's code other than its imports and the entry function (HumanEval's `poly` beside `find_zero`,
    `is_palindrome` beside `make_palindrome`), as the prompt writes it; "" where there is none."""
    try:
        tree = ast.parse(prompt)
    except UNPARSEABLE:
        return ""
    lines = prompt.splitlines()
    kept = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) or getattr(node, "name", None) == entry_point:
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        kept.append("\n".join(lines[first - 1 : node.end_lineno]))
    return "\n\n\n".join(kept)


def _parsed(program: str) -> str:
    """The longest start of the program, line by line, that parses; the program itself where none does."""
    lines = program.split("\n")
    for end in range(len(lines), max(0, len(lines) - 40), -1):
        candidate = "\n".join(lines[:end]).rstrip() + "\n"
        if parses(candidate):
            return candidate
    return program


def asserts_of(text: str, entry_point: str, most: int = MAX_TESTS) -> list[str]:
    """The model's tests: the lines of what it wrote that assert something of the function, each once (the first
    `most` of them). A unittest assertion on a line of its own (`self.assertEqual(f(x), y)`, which instruction
    models write where asked for asserts) is read as the assert it means (`assert f(x) == y`)."""
    found = []
    for line in text.split("\n"):
        line = line.strip()
        line = line if line.startswith("assert ") else _unittest_assert(line)
        if line and entry_point in line:
            found.append(line)
    return [test for test in dict.fromkeys(found) if parses(test)][:most]


# unittest's assertions, as the assert each means: its arguments' count and the expression it checks.
UNITTEST = {
    "assertEqual": (2, "{0} == {1}"), "assertEquals": (2, "{0} == {1}"), "assertNotEqual": (2, "{0} != {1}"),
    "assertTrue": (1, "{0}"), "assertFalse": (1, "not ({0})"), "assertIs": (2, "{0} is {1}"),
    "assertIsNone": (1, "{0} is None"), "assertIsNotNone": (1, "{0} is not None"), "assertIn": (2, "{0} in {1}"),
    "assertNotIn": (2, "{0} not in {1}"), "assertAlmostEqual": (2, "round(abs(({0}) - ({1})), 7) == 0"),
}  # fmt: skip


def _unittest_assert(line: str) -> str:
    """`self.assertX(...)` on one line as the assert it means, or ""."""
    if not line.startswith("self.assert"):
        return ""
    try:
        call = ast.parse(line, mode="eval").body
    except UNPARSEABLE:
        return ""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute) or call.keywords:
        return ""
    count, form = UNITTEST.get(call.func.attr, (0, ""))
    if not form or len(call.args) not in (count, count + 1):  # (a message may follow)
        return ""
    return "assert " + form.format(*(ast.unparse(a) for a in call.args[:count]))


def parses(code: str) -> bool:
    """Whether the code parses (a test the token limit cut does not; a null byte does not either; nor does code
    nested deeper than the parser goes, such as thousands of unary minus signs)."""
    try:
        ast.parse(code)
    except UNPARSEABLE:
        return False
    return True


def simple(env: ProgramEnv, model: Model, prompts: ProgramPrompts, *, max_tokens: int = PROGRAM_TOKENS,
           samples: int = 1, temperature: float = 0.8, seed: int = 0,
           on_step: Callable[[Step], None] | None = None) -> tuple[Trajectory, dict]:  # fmt: skip
    """One implementation, greedy, judged by the hidden tests; or, with `samples` above 1, that many sampled
    together at `temperature`, each judged (for pass@k): the problem's verdict is the first sample's, and the
    record's `samples` says how many passed."""
    trajectory = _trajectory(env, prompts)
    started = time.perf_counter()
    if samples == 1:
        call = model.complete(prompts.implement(env.prompt), stop=prompts.stops, max_tokens=max_tokens)
        program = program_of(env.prompt, call.text, env.entry_point)
        return _judged(env, trajectory, program, [call], started, on_step, tests=None)
    calls = model.sample(prompts.implement(env.prompt), n=samples, temperature=temperature, seed=seed,
                         stop=prompts.stops, max_tokens=max_tokens)  # fmt: skip
    made = [program_of(env.prompt, call.text, env.entry_point) for call in calls]
    passed = 0
    for k in range(samples - 1, 0, -1):  # the others first, each a step with its verdict; the first sample last
        ran = env.judge(made[k])
        passed += ran.passed
        said = f"Sample {k + 1}. {hidden_said(ran)}"
        step = Step(samples - k, None, Action("program", env.entry_point), made[k], said, [calls[k]], seconds=0.0)
        trajectory.steps.append(step)
        if on_step is not None:
            on_step(step)
    trajectory, record = _judged(env, trajectory, made[0], [calls[0]], started, on_step, tests=None)
    passed += trajectory.ended == "passed"
    record["samples"] = {"n": samples, "passed": passed, "temperature": temperature}
    return trajectory, record


def reflexion(env: ProgramEnv, model: Model, prompts: ProgramPrompts, *, iterations: int = 5,
              max_tokens: int = PROGRAM_TOKENS, tests: int = MAX_TESTS, on_step: Callable[[Step], None] | None = None,
              ) -> tuple[Trajectory, dict]:  # fmt: skip
    """Up to `iterations` implementations: the model's own tests first, then an implementation tried on them;
    while some fail and implementations remain, a reflection on the failure and an improved implementation. The
    last implementation (the first to pass its own tests, or the last made) is judged by the hidden tests."""
    trajectory = _trajectory(env, prompts)
    started = time.perf_counter()
    test_call, tests = _own_tests(env, model, prompts, tests)
    calls: list[Completion] = [test_call]
    reflection, program, shown = "", "", ""
    for i in range(1, iterations + 1):
        if i == 1:
            prompt = prompts.implement(env.prompt)
        else:
            reflect_call = _reflect(model, prompts, program, shown)
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


def _own_tests(env: ProgramEnv, model: Model, prompts: ProgramPrompts, most: int) -> tuple[Completion, list[str]]:
    """The model's own tests of the problem: the call, and the tests kept (at most `most`)."""
    asked = fill(prompts.tests, "tests", prompt=env.prompt, entry_point=env.entry_point)
    call = model.complete(asked, stop=TEMPLATE_STOPS if prompts.templated else TEST_STOPS, max_tokens=TEST_TOKENS)
    return call, asserts_of(call.text, env.entry_point, most)


def _reflect(model: Model, prompts: ProgramPrompts, program: str, shown: str) -> Completion:
    """A reflection on an implementation and what its tests said."""
    asked = fill(prompts.reflect, "reflect", program=program.rstrip("\n"), feedback=shown)
    return model.complete(asked, stop=["\n\n", *TEMPLATE_STOPS[1:]], max_tokens=REFLECT_TOKENS)


@dataclass(eq=False)
class Node:
    """An implementation in LATS's tree: its program, what its tests said, its reward (the share of its tests that
    held), the reflection on it (made when it is expanded), its children, visits and value."""

    program: str
    shown: str
    reward: float
    parent: "Node | None" = None
    reflection: str = ""
    children: list = field(default_factory=list)
    visits: int = 0
    value: float = 0.0

    def uct(self, weight: float = 1.0) -> float:
        """Its value a visit, and the exploration term (LATS's `uct`); its reward where it was never visited."""
        if self.visits == 0:
            return self.reward
        return self.value / self.visits + weight * math.sqrt(math.log(max(self.parent.visits, 1)) / self.visits)


def lats(env: ProgramEnv, model: Model, prompts: ProgramPrompts, *, iterations: int = 8, children: int = 5,
         tests: int = MAX_TESTS, temperature: float = 0.8, seed: int = 0, max_tokens: int = PROGRAM_TOKENS,
         on_step: Callable[[Step], None] | None = None) -> tuple[Trajectory, dict]:  # fmt: skip
    """LATS over implementations (its programming search, under rawreact's rules): the model's own tests once; a
    first implementation, greedy; while none passes its tests and iterations remain, the leaf of highest UCT is
    reflected on and expanded into `children` implementations sampled together at `temperature`, each tried on
    the tests and its reward (the share that held) backed up to the root. The first implementation to pass its
    tests, or the one of highest reward (the earliest among equals), is judged by the hidden tests, once: the
    search never sees them (the repository's consults them during the search, docs/programs.md)."""
    trajectory = _trajectory(env, prompts)
    started = time.perf_counter()
    test_call, tests_kept = _own_tests(env, model, prompts, tests)
    call = model.complete(prompts.implement(env.prompt), stop=prompts.stops, max_tokens=max_tokens)

    def made(program: str, parent: Node | None, calls: list[Completion], since: float) -> tuple[Node, list]:
        """A node of the tree, tried on the tests: a step of its own, as it is made."""
        tried, setup = env.try_tests(program, tests_kept)
        held = sum(t.passed for t in tried)
        node = Node(program, feedback(tried, setup), held / len(tried) if tried else 1.0, parent)
        before = parent.reflection if parent else None
        step = Step(len(trajectory.steps) + 1, before, Action("program", env.entry_point), program, node.shown, calls,
                    seconds=time.perf_counter() - since)  # fmt: skip
        trajectory.steps.append(step)
        if on_step is not None:
            on_step(step)
        return node, tried

    root, tried = made(program_of(env.prompt, call.text, env.entry_point), None, [test_call, call], started)
    best, best_tried, order = root, tried, [root]
    for iteration in range(iterations):
        if best.reward == 1.0:  # an implementation passed its tests (or there are none): it is the answer
            break
        since = time.perf_counter()
        node = root
        while node.children:
            node = max(node.children, key=Node.uct)
        reflect_call = _reflect(model, prompts, node.program, node.shown)
        node.reflection = reflect_call.text.strip()
        prompt = prompts.improve_after(env.prompt, node.program, node.shown, node.reflection)
        sampled = model.sample(prompt, n=children, temperature=temperature, seed=seed + iteration * children,
                               stop=prompts.stops, max_tokens=max_tokens)  # fmt: skip
        for k, sample in enumerate(sampled):  # the reflection's call and the time of the expansion go to the first
            calls = [reflect_call, sample] if k == 0 else [sample]
            child, tried = made(program_of(env.prompt, sample.text, env.entry_point), node, calls,
                                since if k == 0 else time.perf_counter())  # fmt: skip
            node.children.append(child)
            order.append(child)
            if child.reward > best.reward:
                best, best_tried = child, tried
            walked = child
            while walked is not None:  # back up the child's reward
                walked.visits += 1
                walked.value += child.reward
                walked = walked.parent
    # The chosen implementation, judged: a last step that makes no call (so not counted as an implementation).
    chosen = (
        f"{best.shown}\n\nChosen: implementation {order.index(best) + 1} of {len(order)}, the first of highest reward"
    )
    return _judged(env, trajectory, best.program, [], time.perf_counter(), on_step, tests_kept, best_tried,
                   chosen)  # fmt: skip


def _trajectory(env: ProgramEnv, prompts: ProgramPrompts) -> Trajectory:
    return Trajectory(env.prompt, prompts.simple, loop="program", header="Problem")


def _judged(env, trajectory: Trajectory, program: str, calls: list[Completion], started: float, on_step,
            tests: list[str] | None, tried=(), said: str = "", reflection: str = "",
            ) -> tuple[Trajectory, dict]:  # fmt: skip
    """The last implementation's step, judged by the hidden tests (after what its own tests `said`); the trajectory
    ended and the program record."""
    ran = env.judge(program)
    verdict = hidden_said(ran)
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
