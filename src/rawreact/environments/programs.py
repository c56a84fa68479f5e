"""A problem of a program as an environment: a program is judged by the problem's hidden tests, or tried on tests
the model wrote, each run apart from rawreact (`sandbox.run_program`).

The hidden tests run as HumanEval's harness runs them: the program (in a namespace that is not `__main__`), then
the problem's `test` code and `check(entry_point)`, in one process with one time limit; the program passes when
that runs to its end. Under the reference rules they run as the repositories' executors run them: the function,
the tests and `check` as one piece of code in one `exec`, in a namespace named as the executor's module. Tests the
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
REFERENCE_HIDDEN = Limits(seconds=10.0, cpu_seconds=10)  # the repositories' `evaluate(..., timeout=10)`, in wall time
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
            if isinstance(_node, _ast.Assert) and isinstance(_node.test, _ast.Compare) and not isinstance(
                _error, TimeoutError
            ):  # what the call gave, under an alarm of its own (a call that hung would hang again)
                _signal.setitimer(_signal.ITIMER_REAL, _SECONDS)
                _got = repr(eval(compile(_ast.Expression(_node.test.left), "test", "eval"), globals()))
        except BaseException:
            pass
        __report__.append([False, _got[:_SHOWN]])
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
"""


# The reference executors' way (Reflexion's and LATS's `PyExecutor.execute`), for the reference rules: each test
# runs as `from typing import *`, the function and the test, executed together in one namespace (the program's
# text is run again for each), with a time limit; a failed test's output is what its call gives (the assert's
# left side, or the whole test where it compares nothing) as `str`, or the error's text where the call fails. A
# call that runs out of time gives their `function_with_timeout`'s error, not its TIMEOUT (which it never reaches:
# `PropagatingThread.join` returns `self.ret`, never set while the thread runs). Nothing of the program runs before
# the tests: a program that does not compile fails each test.
REFERENCE_RUNNER = r"""
import ast as _ast, signal as _signal
def _alarm(*_):
    raise TimeoutError()
_signal.signal(_signal.SIGALRM, _alarm)
def _timed(run):
    _signal.setitimer(_signal.ITIMER_REAL, _SECONDS)
    try:
        return run()
    finally:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
def _output(test):
    try:
        exec("from typing import *\n" + _FUNC, globals())
        node = _ast.parse(test)
        try:
            call = node.body[0].test.left
        except Exception:
            call = node.body[0].test
        return str(_timed(lambda: eval(compile(_ast.Expression(call), "test", "eval"), globals())))
    except TimeoutError:  # their thread helper's join reads `ret` before it asks whether the thread still runs
        return "'PropagatingThread' object has no attribute 'ret'"
    except Exception as error:
        return str(error)
__report__ = []
for _test in _TESTS:
    try:
        _timed(lambda: exec("from typing import *\n" + _FUNC + "\n" + _test, globals()))
        __report__.append([True, ""])
    except BaseException:
        __report__.append([False, _output(_test)[:_SHOWN]])
"""
EXECUTOR = "executors.py_executor"  # the module whose namespace the executors `exec` in (`__name__`)
REFERENCE_SECONDS = 5.0  # the executors' `timeout=5`, a test
REFERENCE_SHOWN = 4000  # characters of an output kept (the executors keep all of it)


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

    def __init__(self, problem: Mapping, hidden: Limits = HIDDEN, internal: Limits = INTERNAL, *,
                 unboxed: bool = False) -> None:  # fmt: skip
        self.problem = dict(problem)
        self.prompt, self.entry_point = self.problem.get("prompt", ""), self.problem.get("entry_point", "")
        self.hidden_limits, self.internal_limits = hidden, internal
        self.unboxed = unboxed  # the user's choice to run programs without a box where this machine has none

    @property
    def isolation(self) -> str:
        """What isolation its programs run with, in words (`sandbox.isolation`)."""
        return isolation()["said"]

    def _run(self, program: str, tests: str, limits: Limits, name: str | None = None) -> Ran:
        return run_program(program, tests, limits, unboxed=self.unboxed, name=name)

    def judge(self, program: str) -> Ran:
        """The program on the problem's hidden tests, as HumanEval's harness runs them."""
        return self._run(program, f"{self.problem['test']}\ncheck({self.entry_point})\n", self.hidden_limits)

    def try_tests(self, program: str, tests: list[str]) -> tuple[list[Tried], str]:
        """The model's own tests on the program, each with its outcome; and why none could run, where the program
        itself failed (a syntax error, an exit at import, a time or memory limit): then every test failed."""
        if not tests:
            return [], ""
        runner = f"_TESTS = {json.dumps(tests)}\n_SECONDS = {TEST_SECONDS}\n_SHOWN = {SHOWN}\n{RUNNER}"
        seconds = self.internal_limits.seconds + TEST_SECONDS * len(tests)
        return _outcomes(self._run(program, runner, replace(self.internal_limits, seconds=seconds)), tests)

    def try_reference(self, func: str, tests: list[str]) -> tuple[bool, str, list["Tried"]]:
        """The model's own tests on `func` as the reference executors run them (REFERENCE_RUNNER): whether all
        held, the feedback they write (`reference_feedback`), and each test's outcome."""
        runner = f"_FUNC = {json.dumps(func)}\n_TESTS = {json.dumps(tests)}\n_SECONDS = {REFERENCE_SECONDS}\n"
        runner += f"_SHOWN = {REFERENCE_SHOWN}\n{REFERENCE_RUNNER}"
        seconds = self.internal_limits.seconds + 2 * REFERENCE_SECONDS * len(tests)
        limits = replace(self.internal_limits, seconds=seconds, cpu_seconds=int(seconds), kept=200_000)
        tried, _ = _outcomes(self._run("", runner, limits, EXECUTOR), tests)
        return all(t.passed for t in tried), reference_feedback(tried), tried

    def judge_reference(self, func: str, typing: str = "*") -> Ran:
        """`func` on the hidden tests as the reference executors' `evaluate` runs it: the function, the problem's
        tests and `check(entry_point)` as one code in one `exec`, under the repositories' limit of 10 wall seconds,
        where `__name__` is the executor module's and the names of `typing` it has are defined: `List` (its own
        import), and all of them (`*`) once its `execute` has run a test in that namespace, as Reflexion's and
        LATS's searches do before they judge (Reflexion's `run_simple` never does)."""
        code = f"from typing import {typing}\n{func}\n\n{self.problem['test']}\n\ncheck({self.entry_point})\n    "
        return self._run(code, "", REFERENCE_HIDDEN, EXECUTOR)


def _outcomes(ran: Ran, tests: list[str]) -> tuple[list[Tried], str]:
    """Each test's outcome from what a tests runner left in `__report__`; where it left none (the program or the
    runner failed: a syntax error, an exit at import, a time or memory limit), every test failed, with why."""
    report = ran.report if ran.passed and isinstance(ran.report, list) and len(ran.report) == len(tests) else None
    if report is None:
        why = ran.reason if not ran.passed else "its tests left no report"
        return [Tried(test, False, why[:SHOWN]) for test in tests], why
    return [Tried(test, bool(ok), str(output)) for test, (ok, output) in zip(tests, report, strict=True)], ""


def hidden_said(ran: Ran) -> str:
    """The hidden tests' verdict, as a step's observation ends with it."""
    return "Hidden tests: passed" if ran.passed else f"Hidden tests: failed ({ran.reason})"


def reference_feedback(tried: list[Tried]) -> str:
    """The feedback the reference executors write: `Tested passed:` and the tests that held, then `Tests failed:`
    and each failed test with `# output: ` and what its call gave."""
    said = "Tested passed:" + "".join(f"\n{t.test}" for t in tried if t.passed)
    return said + "\n\nTests failed:" + "".join(f"\n{t.test} # output: {t.output}" for t in tried if not t.passed)


def feedback(tried: list[Tried], failed_setup: str = "") -> str:
    """The tests' outcome as the model reads it: those that passed, then those that failed with what they gave."""
    passed = [t.test for t in tried if t.passed]
    failed = [f"{t.test} # gave {t.output}" for t in tried if not t.passed]
    lines = ["Tests passed:", *(passed or ["(none)"]), "", "Tests failed:", *(failed or ["(none)"])]
    if failed_setup:
        lines.append(f"(the program itself failed: {failed_setup})")
    return "\n".join(lines)
