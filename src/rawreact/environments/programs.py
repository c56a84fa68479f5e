"""A problem of a program as an environment: a program is judged by the problem's hidden tests, or tried on tests
the model wrote, each run apart from rawreact (`sandbox.run_program`).

The hidden tests run as HumanEval's harness runs them: the program, then the problem's `test` code and
`check(entry_point)`, in one process with one time limit; the program passes when that runs to its end. Tests the
model wrote (Reflexion's internal tests) run in one process too, each with a time limit of its own, and each
says whether it held and, for `assert f(x) == y`, what `f(x)` gave (the feedback Reflexion's executor writes).
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

from rawreact.environments.sandbox import Limits, Ran, isolation, run_program

# HumanEval's harness gives a problem 3 s of wall time (its `timeout`); a busy machine gets more here, and the CPU
# limit holds a program that spins. A problem's own tests take well under a second.
HIDDEN = Limits(seconds=20.0, cpu_seconds=10)
INTERNAL = Limits(seconds=30.0, cpu_seconds=20, kept=40_000)
TEST_SECONDS = 3.0  # one of the model's own tests (Reflexion's executor: `timeout=6`, for a whole test list)
SHOWN = 200  # characters of a test's output or error kept in its feedback

# The internal tests' runner, after the program in its namespace: each test in turn, under an alarm, its outcome
# and (for a failed `assert call == expected`) what the call gave, left in `__report__` for the harness to print.
RUNNER = r"""
import ast as _ast, signal as _signal
def _alarm(*_):
    raise TimeoutError("timed out")
_signal.signal(_signal.SIGALRM, _alarm)
__report__ = []
for _test in _TESTS:
    _signal.setitimer(_signal.ITIMER_REAL, _SECONDS)
    try:
        exec(compile(_test, "test", "exec"), globals())
        __report__.append([True, ""])
    except BaseException as _error:
        _got = type(_error).__name__ + (": " + str(_error) if str(_error) else "")
        try:
            _node = _ast.parse(_test).body[0]
            if isinstance(_node, _ast.Assert) and isinstance(_node.test, _ast.Compare):
                _got = repr(eval(compile(_ast.Expression(_node.test.left), "test", "eval"), globals()))
        except BaseException:
            pass
        __report__.append([False, _got[:_SHOWN]])
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
"""


@dataclass(frozen=True)
class Tried:
    """One of the model's own tests, tried on a program: whether it held, and what the program gave where not."""

    test: str
    passed: bool
    output: str = ""

    def to_dict(self) -> dict:
        return {"test": self.test, "passed": self.passed, "output": self.output}


class ProgramEnv:
    """One problem (HumanEval's fields: task_id, prompt, entry_point, test): its hidden tests, and the model's own
    tests, run on a program apart from rawreact."""

    style = "program"
    verbs = ()

    def __init__(self, problem: Mapping, hidden: Limits = HIDDEN, internal: Limits = INTERNAL) -> None:
        self.problem = dict(problem)
        self.prompt, self.entry_point = self.problem.get("prompt", ""), self.problem.get("entry_point", "")
        self.hidden_limits, self.internal_limits = hidden, internal

    @property
    def isolation(self) -> str:
        """What isolation its programs run with, in words (`sandbox.isolation`)."""
        return isolation()["said"]

    def judge(self, program: str) -> Ran:
        """The program on the problem's hidden tests, as HumanEval's harness runs them."""
        return run_program(program, f"{self.problem['test']}\ncheck({self.entry_point})\n", self.hidden_limits)

    def try_tests(self, program: str, tests: list[str]) -> tuple[list[Tried], str]:
        """The model's own tests on the program, each with its outcome; and why none could run, where the program
        itself failed (a syntax error, an exit at import, a time or memory limit): then every test failed."""
        if not tests:
            return [], ""
        runner = f"_TESTS = {json.dumps(tests)}\n_SECONDS = {TEST_SECONDS}\n_SHOWN = {SHOWN}\n{RUNNER}"
        seconds = self.internal_limits.seconds + TEST_SECONDS * len(tests)
        ran = run_program(program, runner, replace(self.internal_limits, seconds=seconds))
        report = ran.report if ran.passed and isinstance(ran.report, list) and len(ran.report) == len(tests) else None
        if report is None:
            why = ran.reason if not ran.passed else "its tests left no report"
            return [Tried(test, False, why[:SHOWN]) for test in tests], why
        return [Tried(test, bool(ok), str(output)) for test, (ok, output) in zip(tests, report, strict=True)], ""


def feedback(tried: list[Tried], failed_setup: str = "") -> str:
    """The tests' outcome as the model reads it: those that passed, then those that failed with what they gave."""
    passed = [t.test for t in tried if t.passed]
    failed = [f"{t.test} # gave {t.output}" for t in tried if not t.passed]
    lines = ["Tests passed:", *(passed or ["(none)"]), "", "Tests failed:", *(failed or ["(none)"])]
    if failed_setup:
        lines.append(f"(the program itself failed: {failed_setup})")
    return "\n".join(lines)
