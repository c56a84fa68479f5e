"""A LATS search's record (`agents.lats`): its nodes (each a step), its calls by kind, the search as a whole, and
the chosen node's path read back as the question's trajectory."""

import math
from dataclasses import dataclass, field

from rawreact.agents.record import Step, Trajectory
from rawreact.core.actions import Action, Verbs, parse_action
from rawreact.core.metrics import is_answer
from rawreact.models.base import Completion


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


def trajectory_text(shown: str) -> str:
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
