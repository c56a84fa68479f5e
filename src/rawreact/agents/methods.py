"""The rows of the ReAct paper's HotpotQA table (ReAct, Act, Standard, CoT, CoT-SC and the two back-offs),
native tool calls, and Reflexion's trials of ReAct or CoT.

ReAct and Act are the loop (`loop.react`). Standard, CoT and CoT-SC answer from the prompt alone
(`reason`). The back-offs combine them: ReAct -> CoT-SC asks CoT-SC when ReAct gives no answer,
CoT-SC -> ReAct asks ReAct when the majority answer holds fewer than half of the votes. `solve`
runs any of them on one question and returns an `Outcome`, which a run file stores. The Reflexion
methods (`reflexion.trials`) keep every trial in the outcome; its answering part is the last trial's.
"""

from collections.abc import Callable
from dataclasses import dataclass

from rawreact.agents import programs, programs_reference
from rawreact.agents.alfworld import alfworld_run
from rawreact.agents.game import play
from rawreact.agents.guardrails import supported
from rawreact.agents.lats import lats as run_lats
from rawreact.agents.lats_prompts import LatsPromptFiles
from rawreact.agents.lats_records import Search
from rawreact.agents.loop import react
from rawreact.agents.programs import ProgramPrompts
from rawreact.agents.prompts import Prompt, framed
from rawreact.agents.reasoning import Reasoning, reason
from rawreact.agents.record import Step, Trajectory, token_totals
from rawreact.agents.reference import reference_react
from rawreact.agents.reflexion import Trial, trials
from rawreact.agents.reflexion_games import code_trials
from rawreact.agents.swiftsage import react_baseline
from rawreact.agents.tools import tool_react
from rawreact.config.choices import (
    BACKOFFS,
    LATS,
    METHODS,
    PROGRAM_ITERATIONS,
    PROGRAMS,
    REASONING,
    REFLEXION,
    guard_problem,
    loop_problem,
    reflexion_loop_problem,
)
from rawreact.core.metrics import is_answer
from rawreact.environments.env import PassageEnv
from rawreact.environments.game import alfworld_kind
from rawreact.environments.programs import ProgramEnv
from rawreact.environments.scienceworld import ScienceWorldEnv
from rawreact.models.base import Completion, Model


@dataclass
class Outcome:
    """One question under one method: the answer, how it ended, which part answered, and the parts."""

    method: str
    branch: str  # the part whose answer this is: react, act, tools, standard, cot or cot-sc
    trajectory: Trajectory | None = None
    reasoning: Reasoning | None = None
    trials: list[Trial] | None = None  # a Reflexion method's trials, in order; the last one answers
    reflexion: dict | None = None  # a Reflexion method's settings that a record repeats (strategy, evaluator, ...)
    search: Search | None = None  # LATS's search: its tree, and every call it made
    program: dict | None = None  # a program's: its model-written tests, and the hidden tests' verdict (programs.py)

    @property
    def _answering(self) -> Trajectory | Reasoning:
        return self.reasoning if self.branch in REASONING else self.trajectory

    @property
    def answer(self) -> str:
        """The final answer."""
        return self._answering.answer

    @property
    def ended(self) -> str:
        """How the answering part ended (see the table of endings in docs/guardrails.md)."""
        return self._answering.ended

    @property
    def steps(self) -> list[Step]:
        """The steps of the loop's part (none for the methods that only reason)."""
        return [] if self.trajectory is None else self.trajectory.steps

    @property
    def taken(self) -> int:
        """How many steps the model took: the reference loop's closing `finish[]` after its last step, which no
        call wrote, is not one of them (the notebook's 7 steps are 7)."""
        return sum(1 for step in self.steps if step.calls)

    @property
    def calls(self) -> list[Completion]:
        """Every model call, in order (of every trial and reflection, for a Reflexion method)."""
        if self.trials is not None:
            return [c for trial in self.trials for c in trial.calls]
        if self.search is not None:  # every sample of every expansion, every value and reflection
            return [call.completion for call in self.search.calls]
        calls = [c for step in self.steps for c in step.calls]
        samples = [] if self.reasoning is None else [c for s in self.reasoning.samples for c in s.made_by]
        return samples + calls if self.method == "cot-sc-react" else calls + samples

    @property
    def model_calls(self) -> int:
        """How many times the model was called."""
        return len(self.calls)

    def tokens(self) -> dict[str, int | None]:
        """Prompt, evaluated-prompt and completion tokens over every call."""
        return token_totals(self.calls)

    @property
    def seconds(self) -> float:
        """Wall time of the whole question."""
        if self.trials is not None or self.search is not None:
            return sum(c.seconds for c in self.calls)
        reasoning = 0.0 if self.reasoning is None else self.reasoning.seconds
        return reasoning + (0.0 if self.trajectory is None else self.trajectory.seconds)

    @property
    def invalid_actions(self) -> int:
        """Steps whose action could not be carried out."""
        return 0 if self.trajectory is None else self.trajectory.invalid_actions

    @property
    def repeats(self) -> int:
        """Steps that repeated an earlier action and saw the same (see `guardrails.Guard`)."""
        return 0 if self.trajectory is None else self.trajectory.repeats

    @property
    def supported(self) -> bool | None:
        """Whether the answer occurs in what the episode's searches and lookups showed (`guardrails.supported`).

        None when the answer is empty, or came from a method that saw no passage (Standard, CoT, CoT-SC).
        """
        if self.branch in REASONING or self.trajectory is None:
            return None
        traj = self.trajectory
        return supported(traj.answer, traj.evidence, traj.search_hits > 0)

    @property
    def fallback_calls(self) -> int:
        """Steps that made the fallback call for the action alone (the reference's `n_badcalls`)."""
        return 0 if self.trajectory is None else self.trajectory.fallback_calls

    @property
    def loop(self) -> str | None:
        """The loop that ran the actions ("tolerant", "reference" or "tools"), or None for a method without one."""
        return None if self.trajectory is None else self.trajectory.loop

    @property
    def searches(self) -> int:
        """Search actions carried out."""
        return 0 if self.trajectory is None else self.trajectory.searches

    @property
    def search_hits(self) -> int:
        """Search actions that opened a passage."""
        return 0 if self.trajectory is None else self.trajectory.search_hits


def solve(
    question: str,
    env: PassageEnv,
    model: Model,
    prompt: Prompt | str,
    *,
    method: str = "react",
    backoff_prompt: Prompt | str | None = None,
    samples: int = 21,
    sample_temperature: float = 0.7,
    seed: int = 0,
    max_tokens: int = 100,
    on_step: Callable[[Step], None] | None = None,
    loop: str = "tolerant",
    header: str = "Question",
    reflexion: dict | None = None,
    lats: dict | None = None,
    program: dict | None = None,
    **loop_options,
) -> Outcome:
    """Answer `question` by `method` (see METHODS) and return the outcome.

    `prompt` is the method's prompt (for a back-off, the prompt of its first part); a back-off's
    second part uses `backoff_prompt` (a CoT prompt after ReAct, a ReAct prompt after CoT-SC).
    `samples`, `sample_temperature` and `seed` are CoT-SC's; `loop_options` (max_steps, grammar)
    go to the loop. `loop` "reference" runs the ReAct or Act part in the reference notebook's loop
    (`reference.reference_react`, over a `ReferenceEnv`), which has no grammar.
    `header` is the word the question line starts with ("Claim" for FEVER). A Reflexion method takes
    the keyword arguments of `reflexion.trials` in `reflexion` (strategy, trials, evaluator, gold, ...), and
    LATS its settings in `lats` (`prompts`, a `lats_prompts.LatsPrompts`; evaluator, gold, iterations, samples, ...).
    A problem of a program (an environment of the "program" style) is answered by the program methods
    (`programs.simple`, `programs.reflexion` and `programs.lats`), whose settings are `program` (`prompts`,
    `iterations`, `tests`, `children`, `temperature`, `seed`; or `reference`, a
    `programs_reference.ProgramReference`, for a repository's rules).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; the methods are {', '.join(METHODS)}")
    if getattr(env, "style", "react") == "commands":  # a game: the notebook's ALFWorld loop
        return _play(env, model, prompt, method, max_tokens, on_step, loop, header, loop_options, reflexion)
    if isinstance(env, ProgramEnv) or method in PROGRAMS:  # a problem of a program
        return _program(env, model, method, max_tokens, on_step, program)
    if method in BACKOFFS and backoff_prompt is None:
        raise ValueError(f"method {method} needs the prompt of its second part: backoff_prompt")
    repeats = loop_options.get("repeats", "off")
    problem = loop_problem(loop, method, loop_options.get("grammar") is not None, repeats)
    problem = problem or (reflexion_loop_problem(method) if method in REFLEXION and loop == "reference" else None)
    problem = problem or guard_problem(method, repeats, loop_options.get("budget"))
    if problem:
        raise ValueError(problem)
    sampling = {"samples": samples, "temperature": sample_temperature, "seed": seed, "max_tokens": max_tokens}
    sampling["header"] = header
    options = {"max_tokens": max_tokens, "on_step": on_step, "header": header, **loop_options}
    if loop == "reference":
        options.pop("grammar", None)

    def act(part_prompt: Prompt | str) -> Trajectory:
        if loop == "reference":
            return reference_react(question, env, model, part_prompt, thoughts=method != "act", **options)
        return react(question, env, model, part_prompt, thoughts=method != "act", **options)

    if method in ("react", "act"):
        return Outcome(method, method, trajectory=act(prompt))
    if method in REFLEXION:
        if header != "Question":
            raise ValueError("the Reflexion methods answer questions; run FEVER claims with the paper's methods")
        agent = REFLEXION[method]
        if agent == "cot":
            options = {"max_tokens": max_tokens, "header": header}
        made = trials(question, env, model, prompt, agent=agent, **options, **(reflexion or {}))
        last = made[-1].part
        if agent == "cot":
            return Outcome(method, "cot", reasoning=last, trials=made)
        return Outcome(method, "react", trajectory=last, trials=made)
    if method == LATS:
        settings = dict(lats or {})
        prompts, evaluator = settings.pop("prompts"), settings.pop("evaluator", "em")
        text = prompt if isinstance(prompt, str) else prompt.text
        if isinstance(prompts, LatsPromptFiles):
            prompts = prompts.made(text, model)
        search, trajectory = run_lats(question, env, model, prompts, evaluator=evaluator,
                                      reference=loop == "reference", prompt_text=text, **settings)  # fmt: skip
        return Outcome(method, LATS, trajectory=trajectory, search=search)
    if method == "tools":
        text = prompt if isinstance(prompt, str) else prompt.text
        options.pop("grammar", None)
        if header != "Question":
            raise ValueError("the tools method answers questions; run FEVER claims with the paper's methods")
        options.pop("header")
        return Outcome(method, method, trajectory=tool_react(question, env, model, text, **options))
    if method in REASONING:
        return Outcome(method, method, reasoning=reason(question, model, prompt, method=method, **sampling))
    if method == "react-cot-sc":
        trajectory = act(prompt)
        if trajectory.ended == "finish" and is_answer(trajectory.answer):
            return Outcome(method, "react", trajectory=trajectory)
        reasoning = reason(question, model, backoff_prompt, method="cot-sc", **sampling)
        return Outcome(method, "cot-sc", trajectory=trajectory, reasoning=reasoning)
    reasoning = reason(question, model, prompt, method="cot-sc", **sampling)
    if 2 * reasoning.vote.votes >= samples:
        return Outcome(method, "cot-sc", reasoning=reasoning)
    return Outcome(method, "react", trajectory=act(backoff_prompt), reasoning=reasoning)


def _play(env, model: Model, prompt: Prompt | str, method: str, max_tokens: int, on_step, loop: str, header: str,
          options: dict, reflexion: dict | None) -> Outcome:  # fmt: skip
    """A game by ReAct or Act: the game loop (`game.play`), whose lines are commands and (ReAct's) thoughts;
    by ReAct + Reflexion, trials of it, each judged by the game (`reflexion.trials`, agent "game")."""
    if method not in ("react", "act", "react-reflexion"):
        raise ValueError(
            f"games are played by react or act (the paper's ALFWorld rows) or react-reflexion, not {method}"
        )
    grammar = options.get("grammar")
    kind = options.pop("kind", None)  # the game's kind, as its row says it (an environment's own kind comes first)
    if not isinstance(env, ScienceWorldEnv):  # a prompt keyed by kind: the game's kind's exemplars
        prompt = framed(prompt, alfworld_kind(getattr(env, "kind", None), kind))
    if loop == "reference":  # the reference code's own loop, byte for byte: no grammar, no guardrail
        if grammar is not None:
            raise ValueError("the reference game loops send what the model wrote, with no grammar")
        steps = {"max_steps": options["max_steps"]} if "max_steps" in options else {}
        if isinstance(env, ScienceWorldEnv):  # SwiftSage's ReAct baseline
            if method != "react":
                raise ValueError("SwiftSage's ReAct baseline (--loop reference on ScienceWorld) runs react only")
            trajectory = react_baseline(env, model, prompt, max_tokens=max_tokens, on_step=on_step, **steps)
            return Outcome(method, method, trajectory=trajectory)
        if method == "react-reflexion":  # the Reflexion code's alfworld_runs
            made = code_trials(env, model, prompt, on_step=on_step, **steps, **_code_options(reflexion or {}))
            return Outcome(method, "react", trajectory=made[-1].part, trials=made)
        trajectory = alfworld_run(env, model, prompt, max_tokens=max_tokens, on_step=on_step, **steps)
        return Outcome(method, method, trajectory=trajectory)
    if grammar is not None and getattr(grammar, "mode", None) != "commands":
        raise ValueError(f"a game's grammar is its admissible commands (--grammar commands), not {grammar.mode}")
    known = {k: options[k] for k in ("max_steps", "repeats", "budget", "preamble") if k in options}
    if method == "react-reflexion":
        settings = {"evaluator": "won"} | (reflexion or {})
        made = trials("", env, model, prompt, agent="game", max_tokens=max_tokens, header=header, grammar=grammar,
                      on_step=on_step, **known, **settings)  # fmt: skip
        return Outcome(method, "react", trajectory=made[-1].part, trials=made)
    trajectory = play(env, model, prompt, max_tokens=max_tokens, grammar=grammar, thoughts=method == "react",
                      on_step=on_step, header=header, **known)  # fmt: skip
    return Outcome(method, method, trajectory=trajectory)


def _program(env, model: Model, method: str, max_tokens: int, on_step, settings: dict | None) -> Outcome:
    """A problem of a program, by `simple`, `reflexion` or `lats` (agents.programs; under a repository's rules,
    agents.programs_reference), judged by its hidden tests."""
    if not isinstance(env, ProgramEnv):
        raise ValueError(f"method {method} writes programs; run it on problems of programs (--data humaneval)")
    if method not in (*PROGRAMS, LATS):
        raise ValueError(f"a problem of a program is answered by {', '.join((*PROGRAMS, LATS))}, not {method}")
    settings = dict(settings or {})
    reference = settings.pop("reference", None)
    if reference is not None:
        run = {"simple": programs_reference.simple, "reflexion": programs_reference.reflexion,
               "lats": programs_reference.lats}[method]  # fmt: skip
        trajectory, record = run(env, model, reference, on_step=on_step, **settings)
        return Outcome(method, method, trajectory=trajectory, program=record)
    prompts = settings.pop("prompts", None) or ProgramPrompts.load()
    if method == "simple":
        trajectory, record = programs.simple(env, model, prompts, max_tokens=max_tokens, on_step=on_step, **settings)
    elif method == "reflexion":
        trajectory, record = programs.reflexion(env, model, prompts, max_tokens=max_tokens, on_step=on_step,
                                                **{"iterations": PROGRAM_ITERATIONS} | settings)  # fmt: skip
    else:
        trajectory, record = programs.lats(env, model, prompts, max_tokens=max_tokens, on_step=on_step, **settings)
    return Outcome(method, method, trajectory=trajectory, program=record)


def _code_options(reflexion: dict) -> dict:
    """What the Reflexion code's game trials take of a Reflexion method's options (`reflexion_games`)."""
    keys = ("trials", "reflect_prompt", "done", "on_trial", "seed")
    return {k: reflexion[k] for k in keys if k in reflexion}
