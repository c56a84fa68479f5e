"""ScienceWorld's reference loop, byte for byte: SwiftSage's ReAct baseline (`baselines/eval_agent_react.py` and
`eval_utils.findValidActionNew` on its science_world branch), which `--reference DIR` runs on ScienceWorld.

Its rules, restated. The episode's task is loaded with its gold path made, and its description is
`taskdescription()` without its first 18 characters; `look around` starts it. The first prompt is the
words the code's `init_prompt` starts with and the prompt file's exemplar of the task's number
(`d[str(task_num)]`), then the words its `prompt` starts with, the opening observation with its line
breaks and tabs made spaces (`clean`), a line break, the description and `\\n>`. Each call sends the
whole text, stops at a line break and may write 50 tokens; the text stripped at both ends is the action.
An action that starts with the thought verb (`think:`) is answered `OK.` and never reaches the simulator. Any other is
mapped to a valid action (`valid_action`) and sent; a negative score ends the episode, counted 0.
` {action}\\n{observation}\\n>` is appended, with the action as mapped, and the action joins the recent
actions (which start as `look around`). The episode ends when the simulator says it is done, after
twice the simulator's step limit of calls, or when the last five recent actions hold two distinct ones
(a loop). Before each call, while the text is longer than the model's context less 60 tokens, the
exemplar loses its first `>` line up to the next `>` (all of it from its last `>`), and once the
exemplar has none, the episode's text loses its first such line. docs/reference.md lists where this
loop cannot be SwiftSage's.
"""

import re
import time
from collections.abc import Callable

from rawreact.agents.alfworld import line_verbs
from rawreact.agents.prompts import Prompt
from rawreact.agents.record import Step, Trajectory
from rawreact.core.actions import Action
from rawreact.core.errors import ContextLengthExceeded, PromptError
from rawreact.environments.game import THOUGHT_SEEN
from rawreact.environments.scienceworld import SIMULATOR, ScienceWorldEnv
from rawreact.models.base import Model

MAX_TOKENS = 50  # llm_gpt's max_tokens
MARGIN = 60  # the prompt is cut to the context less this many tokens
DESCRIPTION_CUT = 18  # `env.taskdescription()[18:]`: "Task Description:\n"
# The rooms findValidActionNew knows: a door to each can always be opened, and none may be focused on.
ROOMS = ("hallway", "greenhouse", "green house", "kitchen", "bathroom", "outside", "workshop", "art studio",
         "foundry", "bedroom", "living room")  # fmt: skip
_FOCUS_WORDS = re.compile(r"\b(?:focus|on|in|to)\b", re.IGNORECASE)
_NOT_WORD = re.compile(r"[^A-Za-z0-9 ]+")


def clean(text: str) -> str:
    """The code's `clean`: line breaks and tabs as spaces, nothing else changed."""
    return text.replace("\n", " ").replace("\t", " ")


def valid_action(line: str, valid: list[str], look: str, inventory: str, recent: list[str]) -> str:
    """`findValidActionNew` on one prediction, without a sentence model: the line itself where it is a valid
    action now, else the valid action sharing the most words with it (ties: the shortest, then the first in
    alphabetical order), with everything but letters, digits and spaces removed; the line itself, so cleaned,
    where none shares a word.

    The valid actions are the simulator's, with a door to each room opened and no room, agent or air focused
    on, less the last three recent actions, less any that names a door without opening it, and less any
    `focus on` whose words (without focus, on, in and to) are not all in the look or the inventory."""
    actions = set(valid) | {f"open door to {room}" for room in ROOMS}
    actions -= {f"focus on {thing}" for thing in ("agent", "air", *ROOMS)}
    actions -= set(recent[-3:])
    seen = f"{look} {inventory.lower()}"

    def unseen(action: str) -> bool:  # a `focus on` whose words are not all in the look or the inventory
        return action.startswith("focus on") and not all(w in seen for w in _FOCUS_WORDS.sub("", action).split(" "))

    actions -= {a for a in actions if ("door" in a and "open" not in a) or unseen(a)}
    if line.replace("green house", "greenhouse").strip() in actions:
        return line.replace("green house", "greenhouse").strip()
    words, best, most = set(line.split(" ")), line, 0
    for action in sorted(actions, key=lambda a: (len(a), a)):
        shared = len(words & set(action.split(" ")))
        if shared > most:
            best, most = action, shared
    return _NOT_WORD.sub("", best)


def cut(head: str, episode: str) -> tuple[str, str]:
    """One cut of the text that does not fit: the exemplar's first `>` line up to the next `>` (or all of it
    from its last `>`); once the exemplar has no `>`, the episode's first `>` line up to its next `>`."""
    first = head.find(">")
    if first == -1:
        first = episode.find(">")
        second = episode.find(">", first + 1)
        if first == -1 or second == -1:  # nothing left to cut: the code would loop for ever
            raise ContextLengthExceeded("the episode's text alone no longer fits the model's context")
        return head, episode[:first] + episode[second:]
    second = head.find(">", first + 1)
    return (head[:first] if second == -1 else head[:first] + head[second:]), episode


def exemplar(prompt: Prompt, env: ScienceWorldEnv) -> str:
    """The prompt file's exemplar of the episode's task: `d[str(task_num)]`, the task's number being its place in
    ScienceWorld's list of tasks."""
    number = str(SIMULATOR.task_names.index(env.episode.task))
    keyed = prompt.keyed or {}
    if number not in keyed:
        raise PromptError(f"{prompt.source}: no exemplar for task {number} ({env.episode.task}); its keys: "
                          f"{', '.join(sorted(keyed, key=lambda k: (len(k), k))) or 'none'}")  # fmt: skip
    return keyed[number]


def react_baseline(
    env: ScienceWorldEnv,
    model: Model,
    prompt: Prompt,
    *,
    max_steps: int | None = None,
    max_tokens: int = MAX_TOKENS,
    on_step: Callable[[Step], None] | None = None,
) -> Trajectory:
    """Play one ScienceWorld episode as SwiftSage's ReAct baseline does; `ended` is "won", "lost" (done, not won),
    "loop" (its early stop), "max_steps" (twice the simulator's limit, unless `max_steps`) or "context"."""
    obs, info = env.start(gold_path=True)  # the code loads the task with its gold path made, then resets it
    sim, recent = env.simulator, ["look around"]
    env.opening = f"{clean(obs)}\n{env.description[DESCRIPTION_CUT:]}"
    head = prompt.text + exemplar(prompt, env)
    text = prompt.episode_head + env.opening + "\n>"
    traj = Trajectory(env.opening, head, header="", preamble=prompt.episode_head, loop="game", verbs=env.verbs)
    limit = max_steps or 2 * env.episode.limit
    command, thought = line_verbs(env.verbs)  # the environment's verb of whole lines, and its `think:`
    tokenize, n_ctx = getattr(model, "tokenize", None), getattr(model, "n_ctx", None)
    try:
        for i in range(1, limit + 1):
            start = time.perf_counter()
            if tokenize is not None and isinstance(n_ctx, int):
                while len(tokenize(head + text)) > n_ctx - MARGIN:
                    head, text = cut(head, text)
                    traj.prompt = head
            call = model.complete(head + text, stop=["\n"], max_tokens=max_tokens)
            action, done = call.text.strip(), False
            if thought is not None and action.startswith(thought):  # the code's `action.startswith('think:')`
                observation = THOUGHT_SEEN
                sent = Action(env.verbs[thought[:-1].lower()].name, action[len(thought) :].strip())
            else:
                action = valid_action(action, list(sim.get_valid_action_object_combinations()), info["look"],
                                      sim.inventory(), recent)  # fmt: skip
                raw, _, done, info = sim.step(action)
                env.update(info, done)
                done = done or env.lost
                observation, sent = raw, Action(command.name, action)
            observation = clean(observation)
            text += f" {action}\n{observation}\n>"
            recent.append(action)
            error = "truncated" if call.finish_reason == "length" else None
            traj.steps.append(Step(i, None, sent, action, observation, [call], error, time.perf_counter() - start))
            if on_step is not None:
                on_step(traj.steps[-1])
            if done:
                traj.ended = "won" if env.won else "lost"
                break
            if i >= limit:
                traj.ended = "max_steps"
                break
            if len(recent) >= 5 and len(set(recent[-5:])) == 2:
                traj.ended = "loop"
                break
    except ContextLengthExceeded:
        traj.ended = "context"
    traj.reward = env.reward
    return traj
