"""Language Agent Tree Search (LATS, Zhou et al., 2024): Monte Carlo tree search over ReAct steps, as its
repository's `hotpot/lats.py` runs it on HotpotQA.

A node is one step (a thought, an action and what the environment answered); the root is the question. Each
iteration selects a node by UCT, expands it into the distinct steps of `samples` sampled continuations, asks
the model to value each new child (`values` samples of a value prompt, read as a score of 1 to 10), rolls out
from the best child (five samples a step, the best valued one kept, to the rollout's depth), and backs the
rollout's reward up the path. A step that finishes is terminal, and its reward is the evaluator's: `em`, the
answer against the gold answer (the paper's setting: an oracle, which a run says), or `supported`, the
answer found in what the trajectory read (no gold answer needed). The search ends at the first terminal node
of reward 1, or after `iterations`, with the node of highest reward. Each failed finish is a failed
trajectory; while there are fewer than four distinct ones (by answer), each new one brings reflections on
them all, which every expansion prompt then carries.

Two sets of rules share the search. rawreact's own (the default): its ReAct prompt and exemplars for the
steps, its value prompt (prompts/lats/), its Reflexion reflection prompt, each node's environment its own
(the path's actions replayed on a fresh one), the tolerant parser, and the failed trajectories shown to the
value prompt. The repository's (`--reference DIR`, `reference=True`): its prompts read from the clone's
`hotpot/hotpot.py`, its parsing of a sample, one environment shared by the whole search (as its global
`env` is, so a lookup follows the last search of any branch and a finish's answer stays), and the quirks of
its code kept: docs/reference.md lists them, and where rawreact cannot be the same.
"""

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rawreact.agents.record import Step, Trajectory
from rawreact.core.actions import Action, Verbs, parse_action, parse_step
from rawreact.core.errors import PromptError
from rawreact.core.metrics import exact_match, is_answer
from rawreact.models.base import Completion, Model, keep_prefix

# The repository's defaults (hotpot/lats.sh and lats.py).
SAMPLES, VALUES, ITERATIONS, TEMPERATURE = 5, 1, 30, 1.0
DEPTH, ROLLOUT_DEPTH, ROLLOUT_SAMPLES = 7, 4, 5  # expand_node's `depth >= 7`; rollout's max_depth=4 and n = 5
MAX_TOKENS = 100  # models.gpt's max_tokens
STOP = "Observation"  # generate_new_states' stop
REFLECTING = 4  # reflections are written while there are fewer than this many distinct failed trajectories
SCORES = [("10", 1.0), ("9", 0.9), ("8", 0.8), ("7", 0.7), ("6", 0.6), ("5", 0.5), ("4", 0.4), ("3", 0.3),
          ("2", 0.2), ("1", 0.1)]  # fmt: skip
EMPTY_TRIES = 8  # rawreact's own rules: expansions in a row that give no step before the node counts as terminal


def value_of(text: str) -> float:
    """A value reply read as `value_outputs_unwrap` reads it: the first of 10, 9, ..., 1 found anywhere in the
    text, as a tenth (`10` gives 1.0, a text with a `3` and no higher number 0.3), and -1 with no digit."""
    return next((value for digits, value in SCORES if digits in text), -1.0)


@dataclass(eq=False)
class Node:
    """One step of the tree (the root: the question). `value` is its running value, `visits` how often a
    rollout passed through it; `calls` are the indices (into the search's calls) of the call that wrote it.
    A rollout's nodes hang from the tree by their parent but are not its children (`rollout`)."""

    id: int
    parent: "Node | None"
    depth: int
    thought: str = ""
    action: str = ""
    observation: str = ""
    parsed: Action | None = None
    children: list["Node"] = field(default_factory=list)
    visits: int = 0
    value: float = 0.0
    terminal: bool = False
    reward: float = 0.0
    rollout: bool = False
    calls: list[int] = field(default_factory=list)
    answer: str | None = None

    def uct(self) -> float:
        """lats.py's UCT: the value alone before a visit; after, value / visits plus the exploration term."""
        if self.visits == 0:
            return self.value
        return self.value / self.visits + math.sqrt(2 * math.log(self.parent.visits) / self.visits)

    def path(self) -> list["Node"]:
        """The nodes from the root's first child to this one."""
        nodes, node = [], self
        while node is not None and node.parent is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]

    def shown(self) -> str:
        """lats.py's `str(node)`, which its failed trajectories are made of."""
        return (
            f"Node(depth={self.depth}, value={self.value:.2f}, visits={self.visits}, thought={self.thought}, "
            f"action={self.action}, observation={self.observation})"
        )

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "parent": None if self.parent is None else self.parent.id,
            "depth": self.depth,
            "thought": self.thought,
            "action": self.action,
            "observation": self.observation,
            "value": self.value,
            "visits": self.visits,
            "terminal": self.terminal,
            "reward": self.reward,
            "rollout": self.rollout,
            "calls": self.calls,
        }


@dataclass
class Call:
    """One model call of a search, and what it was for: "expand", "value" or "reflect"."""

    kind: str
    completion: Completion


@dataclass
class LatsPrompts:
    """What a search sends. `expand(question_and_steps, reflections)` is a step's prompt, ending where the next
    thought begins; `value(child_text, failed)` a child's value prompt; `reflect(trajectory)` a reflection's."""

    expand: Callable[[str, list[dict]], str]
    value: Callable[[str, list[str], list[dict]], str]
    reflect: Callable[[str], str]
    source: str = ""
    heads: tuple[str, ...] = ()  # the text every expansion and every value prompt begins with, kept by the model


@dataclass
class Search:
    """A LATS search of one question, and its record: every node made, every call, the reflections."""

    question: str
    root: Node
    chosen: Node
    nodes: list[Node]
    calls: list[Call]
    reflections: list[dict]
    iterations: int
    ended: str  # "found" (a terminal node of reward 1), "iterations" (the budget spent), "exhausted"

    def to_dict(self) -> dict:
        """The tree and its costs by kind, for the record (`lats`)."""
        kinds: dict[str, dict] = {}
        for call in self.calls:
            made = kinds.setdefault(call.kind, {"calls": 0, "generated": 0, "evaluated": 0, "seconds": 0.0})
            made["calls"] += 1
            made["generated"] += call.completion.completion_tokens
            made["evaluated"] += call.completion.evaluated_tokens or 0
            made["seconds"] += call.completion.seconds
        return {
            "iterations": self.iterations,
            "ended": self.ended,
            "chosen": self.chosen.id,
            "nodes": [node.to_dict() for node in self.nodes],
            "calls": [call.kind for call in self.calls],
            "cost": kinds,
            "reflections": [r["reflection"] for r in self.reflections],
        }


class Tree:
    """The search's state and its steps, with the rules of lats.py (`reference`) or rawreact's own."""

    def __init__(
        self,
        question: str,
        env,
        model: Model,
        prompts: LatsPrompts,
        *,
        reward: Callable[[str, list[Node]], float],
        samples: int = SAMPLES,
        values: int = VALUES,
        temperature: float = TEMPERATURE,
        depth: int = DEPTH,
        rollout_depth: int = ROLLOUT_DEPTH,
        max_tokens: int = MAX_TOKENS,
        seed: int = 0,
        reference: bool = False,
        verbs: Verbs | None = None,
    ) -> None:
        self.question, self.env, self.model, self.prompts = question, env, model, prompts
        self.reward, self.samples, self.values, self.temperature = reward, samples, values, temperature
        self.depth, self.rollout_depth, self.max_tokens, self.seed = depth, rollout_depth, max_tokens, seed
        self.reference, self.verbs = reference, verbs if verbs is not None else env.verbs
        self.nodes: list[Node] = []
        self.calls: list[Call] = []
        self.failed: list[dict] = []
        self.reflections: list[dict] = []
        self.value_cache: dict[str, float] = {}
        self.root = self._node(None)
        for head in prompts.heads:  # each expansion and value starts from their state, computed once (embedded model)
            keep_prefix(model, head)
        if reference:  # one environment for the whole search, as lats.py's global `env`, going on after a finish
            env.reset()
            env.goes_on = True

    def _node(self, parent: Node | None, **fields) -> Node:
        node = Node(len(self.nodes), parent, 0 if parent is None else parent.depth + 1, **fields)
        self.nodes.append(node)
        return node

    def _sample(self, kind: str, prompt: str, n: int, stop: list[str]) -> list[Completion]:
        # lats.py's reflections call the model without the run's temperature (models.gpt's default, 1.0)
        temperature = TEMPERATURE if self.reference and kind == "reflect" else self.temperature
        made = self.model.sample(prompt, n=n, temperature=temperature, seed=self.seed + len(self.calls),
                                 stop=stop, max_tokens=self.max_tokens)  # fmt: skip
        self.calls += [Call(kind, c) for c in made]
        return made

    def text(self, node: Node) -> str:
        """lats.py's `generate_prompt`: the question, then each step's Thought, Action and Observation lines."""
        lines = [self.question]
        for step in node.path():
            segment = [f"Thought {step.depth}: {step.thought}"] if step.thought else []
            segment += [f"Action {step.depth}: {step.action}"] if step.action else []
            segment += [f"Observation {step.depth}: {step.observation}"] if step.observation else []
            lines.append("\n".join(segment))
        return lines[0] + "".join("\n" + line for line in lines[1:])

    # The failed trajectories, and the reflections on them.

    def unique_failed(self, most: int = 5) -> list[str]:
        """lats.py's `get_unique_trajectories`: the failed trajectories of distinct final answers, at most five,
        each as text (`node_trajectory_to_text`, which parses `str(node)` lines)."""
        found, seen = [], set()
        for failed in self.failed:
            if failed["final_answer"] not in seen:
                found.append(_trajectory_text(failed["trajectory"]))
                seen.add(failed["final_answer"])
            if len(found) >= most:
                break
        return found

    def _reflect(self, x: str) -> None:
        """While there are more distinct failed trajectories than reflections, and fewer than four, reflect on
        every one of them again (`generate_self_reflection`, as lats.py calls it before each expansion)."""
        unique = self.unique_failed()
        if not (len(unique) > len(self.reflections) and len(unique) < REFLECTING):
            return
        joined = "\n".join(f"{x}\n{trajectory}\n" for trajectory in unique)
        mapping = []
        for trajectory in [f"Question: {part}" for part in joined.split("Question: ")[1:]]:
            [call] = self._sample("reflect", self.prompts.reflect(trajectory), 1, [])
            mapping.append({"question": x, "trajectory": trajectory, "reflection": call.text})
        self.reflections = mapping

    # The steps of the search.

    def new_states(self, node: Node, n: int) -> list[Node]:
        """lats.py's `generate_new_states`: `n` samples of the node's next step, each distinct (thought, action)
        made a node, its action carried out; a terminal one of reward 0 is a failed trajectory."""
        x = self.text(node)
        self._reflect(x)
        head = f"Thought {node.depth + 1}:" + (" " if self.reference else "")  # lats.py's y ends in a space
        # lats.py glues the step's header to the line before (`...?Thought 1:`); rawreact's own rules lay the
        # steps out as its exemplars and `--method react` do, a line each
        made = self._sample("expand", self.prompts.expand(x + ("" if self.reference else "\n") + head,
                                                          self.reflections), n, [STOP])  # fmt: skip
        first = len(self.calls) - len(made)
        unique: dict[str, Node] = {}
        for k, call in enumerate(made):
            thought, action, parsed = self._read(head + call.text, node.depth + 1)
            key = f"{thought}::{action}"
            if key in unique or (not self.reference and parsed is None):
                continue
            if not action:  # lats.py: a sample without an Action line (or an empty one) makes no node
                continue
            child = self._node(node, thought=thought, action=action, parsed=parsed, calls=[first + k])
            observation, reward, done = self._act(child)
            child.observation, child.reward, child.terminal = observation, reward, reward == 1 or done
            unique[key] = child
            if child.terminal and reward == 0:
                self.failed.append({"trajectory": self._shown_path(child), "final_answer": self._sent(child)})
        return list(unique.values())

    def _read(self, text: str, depth: int) -> tuple[str, str | None, Action | None]:
        """A sample's thought and action line: lats.py's reading (the text between the first two colons of the
        `Thought N` line and of the first `Action` line) or rawreact's tolerant parser."""
        if self.reference:
            lines = text.split("\n")
            thought = next((line.split(":")[1].strip() for line in lines if line.startswith(f"Thought {depth}")), "")
            action = next((line.split(":")[1].strip() for line in lines if line.startswith("Action") and ":" in line),
                          None)  # fmt: skip
            return thought, action, None
        thought, parsed = parse_step(text.removeprefix(f"Thought {depth}:"), depth, verbs=self.verbs)
        return thought.strip(), None if parsed is None else self.verbs.format(parsed), parsed

    @staticmethod
    def _sent(node: Node) -> str:
        """lats.py's `f"{action_type.lower()}[{action_param}]"` of a node's action line."""
        kind = node.action.split("[")[0] if "[" in node.action else node.action
        argument = node.action.split("[")[1].split("]")[0] if "[" in node.action else ""
        return f"{kind.lower()}[{argument}]"

    def _act(self, node: Node) -> tuple[str, float, bool]:
        """Carry out a new node's action: (observation, reward, done)."""
        if self.reference:  # the shared environment; its finish's answer stays, as WikiEnv's `answer` does
            observation, done = self.env.step(self._sent(node))
            answer = getattr(self.env, "answer", None)
            reward = self.reward(answer, []) if answer is not None else 0.0
            # lats.py scores a node by the `em` of its own step's info, which only a finish (done) has: a step after
            # another branch's right finish is rewarded 1 by the shared environment's answer, yet scores 0
            node.answer = answer if done else None
            return (f"Episode finished, reward = {int(reward)}\n" if done else observation), reward, done
        env = self.env.fresh()  # rawreact's own: the environment of the node's path, its actions replayed
        env.reset()
        for step in node.path()[:-1]:
            env.step(step.parsed)
        observation, done = env.step(node.parsed)
        if node.parsed.name == "finish" or done:
            node.answer = node.parsed.arg if node.parsed.name == "finish" else None
            reward = self.reward(node.answer or "", node.path())
            return observation, reward, True
        return observation, 0.0, False

    def _shown_path(self, node: Node) -> str:
        """lats.py's `collect_trajectory`: `str(node)` of each node from the root, a line each."""
        nodes = [self.root, *node.path()]
        return "\n".join(n.shown() for n in nodes)

    def value_children(self, children: list[Node]) -> list[float]:
        """lats.py's `get_values` over the non-terminal children (a repeated text is valued 0)."""
        texts = [self.text(child) for child in children]
        prompts = {text: self.prompts.value(text, self.unique_failed(), self.reflections) for text in texts}
        asked = list(dict.fromkeys(p for p in prompts.values() if p not in self.value_cache))
        first = {prompt: len(self.calls) + k * self.values for k, prompt in enumerate(asked)}  # each one's first call
        for prompt, made in zip(asked, self._sample_each("value", asked, self.values), strict=True):
            self.value_cache[prompt] = value_of(made[0].text)  # value_outputs_unwrap reads the first sample only
        values, seen = [], set()
        for child, text in zip(children, texts, strict=True):
            if text in seen:
                values.append(0)
                continue
            seen.add(text)
            if prompts[text] in first:
                child.calls.append(first[prompts[text]])
            values.append(self.value_cache[prompts[text]])
        return values

    def _sample_each(self, kind: str, prompts: list[str], n: int) -> list[list[Completion]]:
        """`n` samples of each prompt, as `_sample` of each in turn would draw them; single samples of several
        prompts decoded side by side where the model can (the embedded one: `sample_each`)."""
        each = getattr(self.model, "sample_each", None)
        if n != 1 or len(prompts) < 2 or each is None:
            return [self._sample(kind, prompt, n, []) for prompt in prompts]
        seeds = [self.seed + len(self.calls) + k for k in range(len(prompts))]
        made = each(prompts, temperature=self.temperature, seeds=seeds, stop=[], max_tokens=self.max_tokens)
        self.calls += [Call(kind, c) for c in made]
        return [[c] for c in made]

    def expand(self, node: Node) -> None:
        """lats.py's `expand_node`: a node at the depth limit turns terminal; else its children are added."""
        if node.depth >= self.depth:
            node.terminal = True
            return
        node.children.extend(self.new_states(node, self.samples))

    def evaluate(self, node: Node) -> None:
        """lats.py's `evaluate_node`: the non-terminal children valued, the values given to the children in
        order (so a terminal child among them takes its neighbour's value), zeros for the rest. (Its mean of
        the values, which lats.py returns, is used nowhere.)"""
        votes = self.value_children([child for child in node.children if not child.terminal])
        votes = votes + [0] * (len(node.children) - len(votes))
        for child, vote in zip(node.children, votes, strict=False):
            child.value = vote

    def select(self) -> Node | None:
        """lats.py's `select_node`: down the tree by UCT among non-terminal children; a terminal child of reward
        1 is taken at once; a node whose children are all terminal is cut from its parent."""
        node = self.root
        while node is not None and node.children:
            terminal = [child for child in node.children if child.terminal]
            if len(terminal) == len(node.children):
                if node.parent is not None:
                    node.parent.children.remove(node)
                node = node.parent
                continue
            won = next((child for child in terminal if child.reward == 1), None)
            if won is not None:
                return won
            node = max((child for child in node.children if not child.terminal), key=Node.uct, default=None)
        return node

    def roll_out(self, node: Node) -> tuple[float, Node]:
        """lats.py's `rollout`: five samples a step from the node, the best valued kept, until a terminal step or
        the rollout's depth (its reward is then -1); the reward is the mean of the values kept."""
        depth, rewards, empty = node.depth, [0.0], 0
        while not node.terminal and depth < self.rollout_depth:
            states = []
            while not states:
                states = self.new_states(node, ROLLOUT_SAMPLES)
                for state in states:
                    state.rollout = True
                if not states and not self.reference:  # rawreact's own: a node that gives no step ends it
                    empty += 1
                    if empty >= EMPTY_TRIES:
                        node.terminal = True
                        return -1.0, node
            for state in states:
                if state.terminal:
                    return state.reward, state
            values = []
            while not values:
                values = self.value_children([s for s in states if not s.terminal])
            best = values.index(max(values))
            rewards.append(max(values))
            node = states[best]
            depth += 1
            if depth == self.rollout_depth:
                rewards = [-1.0]
        return sum(rewards) / len(rewards), node

    @staticmethod
    def backpropagate(node: Node, value: float) -> None:
        """lats.py's `backpropagate`: each node up to the root visited once more, its value a running mean of
        `value` (-1 for a terminal node of reward 0)."""
        while node is not None:
            node.visits += 1
            if node.terminal and node.reward == 0:
                node.value = (node.value * (node.visits - 1) - 1) / node.visits
            else:
                node.value = (node.value * (node.visits - 1) + value) / node.visits
            node = node.parent

    def in_tree(self) -> list[Node]:
        """lats.py's `collect_all_nodes`: the root and every node below it, depth first."""
        found, stack = [], [self.root]
        while stack:
            node = stack.pop()
            found.append(node)
            stack.extend(reversed(node.children))
        return found

    def search(self, iterations: int = ITERATIONS) -> Search:
        """lats.py's `lats_search`."""
        rolled: list[Node] = []
        done = 0
        for i in range(iterations):
            done = i + 1
            node = self.select()
            tries = 0
            while node is None or (node.terminal and node.reward != 1):
                node = self.select()
                tries += 1
                if tries > len(self.nodes) + 1:  # lats.py would loop for ever: every path is spent
                    return self._done(node or self.root, done, "exhausted")
            if node.terminal and node.reward == 1:
                return self._done(node, done, "found")
            self.expand(node)
            tries = 0
            while node.terminal or not node.children:
                node = self.select()
                if node is None or tries > len(self.nodes) + EMPTY_TRIES:
                    return self._best(rolled, done, "exhausted")
                self.expand(node)
                tries += 1
            self.evaluate(node)
            reward, terminal = self.roll_out(max(node.children, key=lambda child: child.value))
            rolled.append(terminal)
            if terminal.reward == 1:
                return self._done(terminal, done, "found")
            self.backpropagate(terminal, reward)
            won = [n for n in self.in_tree() if n.terminal and n.reward == 1]
            if won:
                return self._done(max(won, key=lambda n: n.value), done, "found")
        return self._best(rolled, done, "iterations")

    def _best(self, rolled: list[Node], done: int, ended: str) -> Search:
        """The node of highest reward in the tree and among the rollouts' ends (the first such: the root when none
        scored)."""
        return self._done(max([*self.in_tree(), *rolled], key=lambda node: node.reward), done, ended)

    def _done(self, chosen: Node, iterations: int, ended: str) -> Search:
        return Search(self.question, self.root, chosen, self.nodes, self.calls, self.reflections, iterations, ended)


def _trajectory_text(shown: str) -> str:
    """lats.py's `node_trajectory_to_text`: `str(node)` lines read back into Thought, Action and Observation lines
    (an observation ends at its first `)`, as that code reads it), the root's left out."""
    lines = []
    for line in shown.split("\n"):
        try:
            depth = int(line.split(",")[0].split("=")[1].strip())
            thought = line.split(", thought=")[1].split(", action=")[0].strip()
            action = line.split(", action=")[1].split(", observation=")[0].strip()
            observation = line.split(", observation=")[1].split(")")[0].strip()
        except (IndexError, ValueError):
            continue
        if depth != 0:
            lines += [f"Thought {depth}: {thought}"] if thought else []
            lines += [f"Action {depth}: {action}"] if action else []
            lines += [f"Observation {depth}: {observation}"] if observation else []
    return "\n".join(lines)


def chosen_trajectory(search: Search, prompt: str, verbs: Verbs) -> Trajectory:
    """The chosen node's path as the question's trajectory: its steps, each with the call that wrote it, and
    its answer where it finished; `ended` is "finish" for a node that answered, else "spent"."""
    traj = Trajectory(search.question.removeprefix("Question: "), prompt, loop="lats", verbs=verbs)
    for step in search.chosen.path():
        action = step.parsed if step.parsed is not None else parse_action(step.action, verbs=verbs)
        calls = [search.calls[k].completion for k in step.calls[:1]]
        error = None if action is not None else "no action"
        traj.steps.append(Step(step.depth, step.thought, action, step.action, step.observation.rstrip("\n"), calls,
                               error, sum(c.seconds for c in calls)))  # fmt: skip
    answer = search.chosen.answer
    traj.answer = answer if answer is not None else ""
    traj.ended = "finish" if answer is not None and is_answer(answer) else "spent"
    return traj


def em_reward(gold: str) -> Callable[[str | None, list[Node]], float]:
    """The `em` evaluator: 1 when the answer matches the gold answer (the paper's setting: an oracle)."""
    return lambda answer, path: float(bool(answer is not None and exact_match(answer, gold)))


@dataclass(frozen=True)
class LatsPromptFiles:
    """What a run's LATS prompts are made of: the repository's `hotpot/hotpot.py` (`lats_prompts`, its rules), or
    rawreact's value prompt text and reflection prompt (a ReflectPrompt); `made(steps, model)` puts them together
    around the run's ReAct prompt `steps`."""

    lats_prompts: str | None = None
    value: str = ""
    reflect: object = None
    value_source: str = "prompts/lats/value.txt"

    @property
    def source(self) -> str:
        """Where the prompts come from: the repository's file, or rawreact's value and reflection prompts."""
        return self.lats_prompts or f"{self.value_source} + {self.reflect.source}"

    @property
    def sha256(self) -> str:
        """A hash of what the prompts are made of: the repository's file, or the value and reflection prompts."""
        if self.lats_prompts is not None:
            return hashlib.sha256(Path(self.lats_prompts).read_bytes()).hexdigest()
        return hashlib.sha256(f"{self.value}\0{self.reflect.sha256}".encode()).hexdigest()

    def made(self, steps: str, model: Model) -> LatsPrompts:
        """The prompts of a search, counting tokens (for the repository's 4,000-token limit) as `model` does."""
        if self.lats_prompts is None:
            return own_prompts(steps, self.value, self.reflect, source=self.source)
        tokenize = getattr(model, "tokenize", None)
        return reference_prompts(self.lats_prompts, (lambda t: len(tokenize(t))) if tokenize else words)


def words(text: str) -> int:
    """A token count for a model that cannot count its own: a word and the space before it, as the scripted model
    counts."""
    return len(text.split())


REFERENCE_STRINGS = ("cot_prompt", "cot_prompt_short", "cot_prompt_feedback", "cot_prompt_feedback_short",
                     "value_prompt_reasoning", "reflection_prompt")  # fmt: skip
# The fields each template may name: what `HotPotQATask` fills them with (`.format(input=..., ...)`).
REFERENCE_FIELDS = {
    "cot_prompt": {"input"},
    "cot_prompt_short": {"input"},
    "cot_prompt_feedback": {"trajectories", "input"},
    "cot_prompt_feedback_short": {"trajectories", "input"},
    "value_prompt_reasoning": {"s", "input"},
    "reflection_prompt": {"trajectory"},
}


def reference_strings(path: str) -> dict[str, str]:
    """The repository's templates, read from its `hotpot/hotpot.py`, each checked to name only the fields its
    task fills: a PromptError naming the template and the field, when the file is read (before any model)."""
    import string

    from rawreact.agents.prompts import python_string

    found = {name: python_string(Path(path), name) for name in REFERENCE_STRINGS}
    for name, template in found.items():
        allowed = REFERENCE_FIELDS[name]
        try:
            fields = [field for _, field, _, _ in string.Formatter().parse(template) if field is not None]
        except ValueError as error:
            raise PromptError(
                f"{path}: {name} is not a format template: {error}; restore it from the repository"
            ) from None
        for named in fields:
            if named not in allowed:
                filled = ", ".join("{" + f + "}" for f in sorted(allowed))
                raise PromptError(
                    f"{path}: {name} names the field {{{named}}}, and LATS fills only {filled} in it; restore the "
                    "template from the repository"
                )
    return found


LONGEST = 4000  # hotpotqa.py's max_token_length: past it, the short prompts


def reference_prompts(path: str, count: Callable[[str], int]) -> LatsPrompts:
    """The repository's prompts, read from its `hotpot/hotpot.py` (`path`), put together as its `HotPotQATask`
    does: the CoT prompt (with the failed trajectories and reflections, where there are any) around the
    question and steps, its short forms past 4,000 tokens (`count` counts them: the model's tokenizer here,
    GPT-2's there); the value prompt `value_prompt_reasoning` alone (its branch with the failed trajectories
    is never taken: `if len(z) != 0 and False`); the reflection prompt around a failed trajectory."""
    found = reference_strings(path)

    def expand(text: str, reflections: list[dict]) -> str:
        if not reflections:
            prompt = found["cot_prompt"].format(input=text)
            return found["cot_prompt_short"].format(input=text) if count(prompt) > LONGEST else prompt
        said = "".join(f"{r['trajectory']}FAILED TRAJECTORY\nReflection: {r['reflection']}\n\n" for r in reflections)
        prompt = found["cot_prompt_feedback"].format(trajectories=said, input=text)
        if count(prompt) > LONGEST:
            said = "".join(f"{r['trajectory']}FAILED TRAJECTORY\nReflection: {r['reflection']}\n\n"
                           for r in reflections[:3])  # fmt: skip
            prompt = found["cot_prompt_feedback_short"].format(trajectories=said, input=text)
        return prompt

    def value(text: str, failed: list[str], reflections: list[dict]) -> str:
        return found["value_prompt_reasoning"].format(s="", input=text + "\nThis trajectory is ")

    heads = tuple(_literal_head(found[name]) for name in ("cot_prompt", "value_prompt_reasoning"))
    return LatsPrompts(expand, value, lambda trajectory: found["reflection_prompt"].format(trajectory=trajectory),
                       source=f"{path}#{','.join(REFERENCE_STRINGS)}", heads=heads)  # fmt: skip


def _literal_head(template: str) -> str:
    """The text a `str.format` template begins with, up to its first field."""
    import string

    literal, *_ = next(iter(string.Formatter().parse(template)), ("", None))
    return literal


WRONG = "This trajectory is wrong.\nThus the correctness score is 1"  # how own value prompts show a failed one


def own_prompts(steps: str, value_text: str, reflect, source: str = "") -> LatsPrompts:
    """rawreact's prompts: its ReAct prompt (`steps`, instruction and exemplars) before the question and steps,
    with the reflections on failed attempts between them; its value prompt (`value_text`, prompts/lats/) before
    the trajectory, the failed ones shown first; its Reflexion reflection prompt (`reflect`, a ReflectPrompt)."""

    def expand(text: str, reflections: list[dict]) -> str:
        if not reflections:
            return steps + text
        lessons = "".join(f"- {' '.join(r['reflection'].split())}\n" for r in reflections)
        return f"{steps}Earlier attempts at this question failed. What was learned from them:\n{lessons}\n{text}"

    def value(text: str, failed: list[str], reflections: list[dict]) -> str:
        question = text.split("\n", 1)[0]
        wrong = "".join(f"{question}\n{f}\n{WRONG}\n\n" for f in failed[:2])
        return f"{value_text}{wrong}{text}\nThis trajectory is"

    def reflection(trajectory: str) -> str:
        question, _, rest = trajectory.partition("\n")
        return reflect.text(question.removeprefix("Question: "), rest.strip("\n"))

    return LatsPrompts(expand, value, reflection, source=source, heads=(steps, value_text))


def lats(
    question: str,
    env,
    model: Model,
    prompts: LatsPrompts,
    *,
    gold: str = "",
    evaluator: str = "em",
    iterations: int = ITERATIONS,
    reference: bool = False,
    prompt_text: str = "",
    **options,
) -> tuple[Search, Trajectory]:
    """Search one question by LATS; the search, and the chosen node's path as the question's trajectory.

    `evaluator` "em" rewards a finish that matches `gold` (an oracle: the paper's setting), "supported" one
    whose answer occurs in what its path read."""
    from rawreact.agents.guardrails import supported

    if evaluator == "em":
        reward = em_reward(gold)
    elif evaluator == "supported":

        def reward(answer: str | None, path: list[Node]) -> float:
            seen = [n.observation for n in path if n.parsed is not None and n.parsed.name != "finish"]
            return float(bool(answer) and bool(supported(answer, seen, bool(seen))))

    else:
        raise ValueError(f"LATS judges a finish by em or supported, not {evaluator!r}")
    tree = Tree(f"Question: {question}", env, model, prompts, reward=reward, reference=reference, **options)
    search = tree.search(iterations)
    return search, chosen_trajectory(search, prompt_text, tree.verbs)
