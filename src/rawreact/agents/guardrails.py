"""Guardrails for small models: repeated actions, a token budget per episode, and answers checked
against what the agent saw.

Each is a setting that `compare` can switch. `Guard` watches one episode for either loop:
`allows` is asked before each step (the budget), `check` after it (repeats). `supported` says
whether a final answer occurs in what the episode observed. The table of endings in docs/guardrails.md lists
every value of `ended`, `ENDINGS` here; a test keeps the two the same.
"""

from dataclasses import dataclass, field

from rawreact.config.choices import setting_problem
from rawreact.core.actions import PASSAGE_VERBS, Action, Verbs, format_action
from rawreact.core.metrics import is_answer, normalize_answer
from rawreact.environments.titles import title_key
from rawreact.models.base import Completion

ENDINGS = ("finish", "max_steps", "context", "no_answer", "repeat", "budget", "text", "won", "lost", "loop", "spent")


def spent(calls: list[Completion]) -> int:
    """Tokens `calls` cost: prompt tokens the model evaluated (the whole prompt where a backend does
    not say) plus tokens it generated."""
    return sum(
        (c.prompt_tokens if c.evaluated_tokens is None else c.evaluated_tokens) + c.completion_tokens for c in calls
    )


def _key(action: Action) -> tuple[str, str]:
    """An action as the repeat check compares it: the verb, and the argument ignoring case and white space."""
    return action.name, title_key(action.arg)


@dataclass
class Guard:
    """The guardrails of one episode.

    A step repeats an earlier one when it takes the same action (verb and argument, ignoring case
    and white space): a second search of a title (found or not), a thought said twice; or when it is
    a line cut at the token limit (no action could be read) that an earlier step wrote too. A verb that
    moves on (`Verb.moves_on`, a lookup) repeats only when it also sees the same observation (it ran
    out, or started over), since a lookup of the same keyword is how the model moves on to the next result.
    `repeats` says what a repeat does: "off" only counts it, "note" adds a note after its
    observation, "stop" ends the episode (`ended="repeat"`). With a `budget`, a step starts only
    if the tokens spent so far plus `max_tokens` (the most its call may write) fit the budget;
    otherwise the episode ends (`ended="budget"`).
    """

    repeats: str = "off"
    budget: int | None = None
    verbs: Verbs = PASSAGE_VERBS  # the environment's: which verbs move on (a lookup's next result)
    _seen: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        problem = setting_problem(self.repeats, self.budget)
        if problem:
            raise ValueError(problem)

    def allows(self, calls: list[Completion], max_tokens: int) -> bool:
        """Whether the next step may start, given the episode's calls so far."""
        return self.budget is None or spent(calls) + max_tokens <= self.budget

    def check(self, step) -> bool:
        """Mark `step` if it repeats an earlier step (noting it under "note"); True when the episode must stop."""
        if step.action is None and step.error == "truncated" and step.action_text.strip():
            key = ("", title_key(step.action_text))  # a line cut at the token limit, written again whole: a repeat
        elif step.action is None or step.action.name == "finish":
            return False
        else:
            key = _key(step.action)
        earlier = self._seen.get(key)
        self._seen[key] = (step.i, step.observation)
        verb = None if step.action is None else self.verbs.get(step.action.name)
        if earlier is None or (verb is not None and verb.moves_on and earlier[1] != step.observation):
            return False
        step.repeat_of = earlier[0]
        if self.repeats == "note":
            did = step.action_text if step.action is None else format_action(step.action, self.verbs)
            step.note = f" (Note: step {earlier[0]} already did {did} and saw the same. Try a different action.)"
        return self.repeats == "stop"


def supported(answer: str, observations: list[str], opened: bool) -> bool | None:
    """Whether `answer` occurs, as whole words after normalisation, in one of `observations`.

    A yes/no answer counts as supported when a search `opened` a passage. None for no answer (`metrics.is_answer`).
    """
    wanted = normalize_answer(answer)
    if not is_answer(answer):  # "", "。", a zero-width space: no answer to look for
        return None
    if wanted in ("yes", "no"):
        return opened
    return any(f" {wanted} " in f" {normalize_answer(text)} " for text in observations)
