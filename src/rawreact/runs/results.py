"""A run's results: each question's `Result` (its outcome, scores and costs) and the record written for it, and the
counts a run's records add up to (calls answered by the cache, where questions ran). `runs.run` makes them."""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from rawreact.agents.methods import Outcome
from rawreact.agents.record import token_totals
from rawreact.core.metrics import scores
from rawreact.core.tasks import TaskType, task_type
from rawreact.tasks.collection import Question
from rawreact.tasks.fever import label_score, lenient_score, read_label


@dataclass(frozen=True)
class Result:
    """One question's outcome: the gold answer, what the method did, and the scores."""

    question: Question
    outcome: Outcome
    started: float | None = None  # wall-clock time (Unix seconds) when the question began, and ended
    finished: float | None = None
    endpoint: str | None = None  # the server of a fleet that ran the episode (see models.fleet)
    lost_on: tuple[str, ...] = ()  # the servers that failed under the episode, once per start over
    ray: dict | None = None  # on a Ray cluster (runs.cluster): the node and actor that answered, and the nodes lost
    # Its run file line, where it was worked out already (by the Ray actor that answered): `to_dict` returns it.
    record: dict | None = field(default=None, compare=False, repr=False)

    @property
    def task(self) -> TaskType:
        """The question's task type (`core.tasks`): what its scores are, and where they come from."""
        return task_type(self.question.task)

    @property
    def scores(self) -> dict[str, float | None]:
        """Its task type's scores by name, the headline first: EM and F1, or success and reward."""
        return {key: getattr(self, key) for key in self.task.keys}

    @property
    def em(self) -> float | None:
        """Exact match of the prediction against the gold answer (for a claim, against its label, as the
        reference's reward); None when the question has no gold answer (it is not scored), and for a task
        whose outcome the environment judges (a game: `success` and `reward`)."""
        scoring = self.task.scoring
        if scoring == "label":
            return label_score(self.outcome.answer, self.question.answer)
        return None if scoring == "outcome" else scores(self.outcome.answer, self.question.answer)[0]

    @property
    def f1(self) -> float | None:
        """Token F1 of the prediction against the gold answer (for a label, label accuracy again); None when
        the question has no gold answer."""
        if self.task.scoring != "answer":
            return self.em
        return scores(self.outcome.answer, self.question.answer)[1]

    @property
    def supported(self) -> bool | None:
        """Whether the answer occurs in what the episode saw; None for a task that does not look (a label)."""
        return self.outcome.supported if self.task.supported else None

    def _times(self) -> dict:
        if self.started is None or self.finished is None:
            return {}
        return {"started": round(self.started, 3), "finished": round(self.finished, 3)}

    def to_dict(self) -> dict:
        """One JSON line of a run file.

        `trajectory` holds the loop's part (ReAct or Act; null for the methods that only reason),
        `reasoning` the Standard, CoT or CoT-SC part (null when there is none), and `branch` says
        which part gave the answer. `vote_share` is the winner's share of the CoT-SC votes. `loop`
        is the loop that acted ("tolerant" or "reference"; null without one); `fallback_calls`
        counts the steps that asked for the action alone (the reference's `n_badcalls`), and
        `invalid_actions` the steps whose action could not be carried out. `repeats` counts the
        steps that repeated an earlier action and saw the same, and `supported` says whether the
        answer occurs in what the searches and lookups showed (null: no answer, or no passage seen).
        `started` and `finished` are the wall-clock times (Unix seconds) the question began and
        ended: under workers questions overlap, and the run's throughput counts the time covered.
        `kind` is HotpotQA's type and level (`bridge/hard`), where the data gives them. A fleet's run
        (several servers) adds `endpoint`, the server that ran the whole episode, `restarts`, how many
        times it started over after a server failed mid-episode (the lost attempts' steps are not kept),
        and `lost_on`, the server that failed each time, so the manifest's counts per server come from
        the records alone. A run on Ray (`runs.cluster`) adds `ray`: the `node` that answered, the `actor`, how
        many times the question started over because its actor or node died (`restarts`), and those nodes
        (`lost_on`).
        """
        if self.record is not None:
            return dict(self.record)
        out = self.outcome
        reasoning = out.reasoning
        return (
            {
                "id": self.question.id,
                "question": self.question.question,
                "answer": self.question.answer,
                "prediction": out.answer,
                "em": self.em,
                "f1": self.f1,
                "method": out.method,
                "branch": out.branch,
                "loop": out.loop,
                "ended": out.ended,
                "steps": out.taken,
                "model_calls": out.model_calls,
                "invalid_actions": out.invalid_actions,
                "fallback_calls": out.fallback_calls,
                "repeats": out.repeats,
                "supported": self.supported,
                "searches": out.searches,
                "search_hits": out.search_hits,
                "vote_share": reasoning.vote.share if reasoning is not None and reasoning.method == "cot-sc" else None,
                "tokens": out.tokens(),
                "seconds": out.seconds,
                "trajectory": None if out.trajectory is None else out.trajectory.to_dict(),
                "reasoning": None if reasoning is None else reasoning.to_dict(),
                **(
                    {}
                    if self.started is None
                    else {"started": round(self.started, 3), "finished": round(self.finished, 3)}
                ),
                **({"kind": self.question.kind} if self.question.kind else {}),
                **({} if self.endpoint is None else self._served()),
                **({} if self.ray is None else {"ray": self.ray}),
            }
            | self._own()
            | self._trials()
            | self._lats()
        )

    @property
    def restarts(self) -> int:
        """How many times the episode started over after its server failed."""
        return len(self.lost_on)

    def _served(self) -> dict:
        return {"endpoint": self.endpoint, "restarts": self.restarts, "lost_on": list(self.lost_on)}

    def _lats(self) -> dict:
        """LATS's own field: its search, with the tree and each kind of call's cost (the evaluator: in the manifest)."""
        search = self.outcome.search
        return {} if search is None else {"lats": search.to_dict()}

    def _trials(self) -> dict:
        """A Reflexion method's own fields: its settings, and each trial with its scores and cost."""
        out = self.outcome
        if out.trials is None:
            return {}
        trials = []
        for trial in out.trials:
            em, f1 = scores(trial.answer, self.question.answer) if self.question.answer else (None, None)
            calls = trial.calls
            cost = {"model_calls": len(calls), "tokens": token_totals(calls), "seconds": sum(c.seconds for c in calls)}
            won = {}
            if self.task.scoring == "outcome":  # a trial the environment judged: whether it was won, its reward
                won = {"success": float(trial.ended == "won"), "reward": trial.part.reward}
            trials.append(
                {"answer": trial.answer, "ended": trial.ended, "em": em, "f1": f1, **won, **cost} | trial.to_dict()
            )
        return {"reflexion": out.reflexion, "trials": trials}

    @property
    def success(self) -> float | None:
        """1.0 when the game was won (a program passed its hidden tests), 0.0 when not; None for a task scored by
        its answer."""
        if self.task.scoring != "outcome":
            return None
        return float(self.outcome.ended == self.task.won)

    @property
    def reward(self) -> float | None:
        """A game's reward (the share of its points scored); None for a task scored by its answer."""
        traj = self.outcome.trajectory
        return None if self.task.scoring != "outcome" or traj is None else traj.reward

    @property
    def score(self) -> float | None:
        """The environment's own score, where its task type declares one (ScienceWorld's: the reward times 100,
        0 to 100); None otherwise."""
        reward = self.reward
        return None if reward is None or "score" not in self.task.fields else round(reward * 100, 6)

    def _own(self) -> dict:
        """The fields the task type adds to a record (`TaskType.fields`), with its name: none for a question."""
        if self.task.scoring == "label":
            return self._claim()
        if self.outcome.program is not None:  # a program: whether it passed, its tests and the hidden verdict
            return {"task": self.task.name, "success": self.success, "program": self.outcome.program}
        if self.task.scoring == "outcome":  # whether it was won (`success`), its reward, and its kind (a recipe)
            made = {"task": self.task.name, "success": self.success, "reward": self.reward, "game": self.question.kind}
            return made | ({"score": self.score} if "score" in self.task.fields else {})
        return {}

    def _claim(self) -> dict:
        """A claim's own fields: the label read leniently from the answer, and that reading's score. Where
        CoT-SC answered, the lenient reading is its own vote, on the label each sample gives (the answer
        that scores is the vote on what the score reads)."""
        out, gold = self.outcome, self.question.answer
        answer = out.answer
        if out.branch == "cot-sc" and out.reasoning is not None:
            answer = out.reasoning.lenient_vote.answer
        return {"task": self.task.name, "label": read_label(answer), "lenient_em": lenient_score(answer, gold)}


def cached_counts(records: Iterable[dict]) -> dict[str, int]:
    """The model calls a call cache answered (`hits`) and the others (`made`), over every call the records hold
    (steps, samples, trials and reflections; a CoT-SC draw counts each sample). Counted from what the run file
    holds, they add up over kills and resumes, where one process's own counts would not."""
    counts = {"hits": 0, "made": 0}
    for call in _calls(list(records)):
        counts["hits" if call.get("cached") is True else "made"] += 1
    return counts


def _calls(found: object) -> Iterator[dict]:
    """Every call within `found` (a record, or a part of one): the objects with a text and a finish reason."""
    if isinstance(found, dict) and "text" in found and "finish_reason" in found:
        yield found
    elif isinstance(found, dict | list):
        for item in found.values() if isinstance(found, dict) else found:
            yield from _calls(item)


def placement_counts(records: Iterable[dict]) -> dict[str, dict[str, dict[str, int]]]:
    """Where a run's questions ran, counted from its records: a fleet's episodes per server (`endpoints`) and a Ray
    run's questions per node (`nodes`), each kept when the run has any. Counted from what the run file holds, they
    add up over kills, resumes and merges, where one process's own counts would not."""
    records = list(records)
    counts = {"endpoints": served_counts(records), "nodes": node_counts(records)}
    return {key: found for key, found in counts.items() if found}


def served_counts(records: Iterable[dict]) -> dict[str, dict[str, int]]:
    """Per server of a fleet: the episodes it finished, and those that started over elsewhere when it failed."""
    return _tally(((r.get("endpoint"), r.get("lost_on")) for r in records), "episodes")


def node_counts(records: Iterable[dict]) -> dict[str, dict[str, int]]:
    """Per Ray node: the questions it answered, and those that started over elsewhere when it (or its actor) died."""
    placed = (r.get("ray") for r in records)
    return _tally(((p.get("node"), p.get("lost_on")) for p in placed if isinstance(p, dict)), "questions")


def _tally(pairs: Iterable[tuple], done: str) -> dict[str, dict[str, int]]:
    """Counts by name from (who finished, who was lost under it) pairs: `done` for the first, `lost` for each of
    the second."""
    counts: dict[str, dict[str, int]] = {}
    for finished, lost_on in pairs:
        if isinstance(finished, str):
            counts.setdefault(finished, {done: 0, "lost": 0})[done] += 1
        for name in lost_on or ():
            counts.setdefault(name, {done: 0, "lost": 0})["lost"] += 1
    return counts
