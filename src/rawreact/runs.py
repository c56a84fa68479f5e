"""Running many questions: one trajectory and one score per question, written as it finishes."""

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rawreact.collection import Question
from rawreact.env import PassageEnv
from rawreact.errors import DataError
from rawreact.loop import Step, Trajectory, react
from rawreact.metrics import exact_match, f1_score
from rawreact.models.base import Model
from rawreact.prompts import Prompt


@dataclass(frozen=True)
class Result:
    """One question's outcome: the gold answer, the trajectory and its scores."""

    question: Question
    trajectory: Trajectory

    @property
    def em(self) -> float:
        """Exact match of the prediction against the gold answer."""
        return exact_match(self.trajectory.answer, self.question.answer)

    @property
    def f1(self) -> float:
        """Token F1 of the prediction against the gold answer."""
        return f1_score(self.trajectory.answer, self.question.answer)

    def to_dict(self) -> dict:
        """One JSON line of a run file."""
        traj = self.trajectory
        return {
            "id": self.question.id,
            "question": self.question.question,
            "answer": self.question.answer,
            "prediction": traj.answer,
            "em": self.em,
            "f1": self.f1,
            "ended": traj.ended,
            "steps": len(traj.steps),
            "model_calls": traj.model_calls,
            "invalid_actions": traj.invalid_actions,
            "tokens": traj.tokens(),
            "seconds": traj.seconds,
            "trajectory": traj.to_dict(),
        }


def run_questions(
    questions: Iterable[Question],
    env: Callable[[Question], PassageEnv],
    model: Model,
    prompt: Prompt,
    *,
    out: str | Path | None = None,
    on_step: Callable[[Question, Step], None] | None = None,
    **react_options,
) -> Iterator[Result]:
    """Run `react` on each question in turn, yielding each result as soon as it is done.

    `env` gives the environment of a question. With `out`, each result is appended to that
    JSONL file and flushed before it is yielded, so an interrupted run loses nothing finished.
    """
    try:  # opened before the first question, so a bad path fails before any model time is spent
        sink = open(out, "a", encoding="utf-8") if out else None  # noqa: SIM115 (closed by _results)
    except OSError as error:
        raise DataError(f"{out}: cannot write the results: {error.strerror}; check the folder exists") from None
    return _results(questions, env, model, prompt, sink, on_step, react_options)


def _results(questions, env, model, prompt, sink, on_step, react_options) -> Iterator[Result]:
    try:
        for question in questions:
            step_hook = None if on_step is None else (lambda step, q=question: on_step(q, step))
            traj = react(question.question, env(question), model, prompt, on_step=step_hook, **react_options)
            result = Result(question, traj)
            if sink is not None:
                sink.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
                sink.flush()
            yield result
    finally:
        if sink is not None:
            sink.close()
