"""Language Agent Tree Search (LATS, Zhou et al., 2024): Monte Carlo tree search over ReAct steps, as its
repository's `hotpot/lats.py` runs it on HotpotQA.

A node is one step (a thought, an action and what the environment answered); the root is the question. Each iteration
selects a node by UCT, expands it into the distinct steps of `samples` sampled continuations, asks the model to value
each new child (`values` samples of a value prompt, read as a score of 1 to 10), rolls out from the best child (five
samples a step, the best valued one kept, to the rollout's depth), and backs the rollout's reward up the path. A step
that finishes is terminal, and its reward is the evaluator's: `em`, the answer against the gold answer (the paper's
setting: an oracle, which a run says), or `supported`, the answer found in what the trajectory read (no gold answer
needed). The search ends at the first terminal node of reward 1, or after `iterations`, with the node of highest
reward. Each failed finish is a failed trajectory; while there are fewer than four distinct ones (by answer), each new
one brings reflections on them all, which every expansion prompt then carries.

One room: the search's steps (select, expand, value, roll out, back up, reflect) share one tree, its calls and one
environment, and read in the order of lats.py's functions; split, each would take the whole tree as an argument.

Two sets of rules share the search (their prompts: `lats_prompts`; the search's record: `lats_records`). rawreact's
own (the default): its ReAct prompt and exemplars for the steps, its value prompt (prompts/lats/), its Reflexion
reflection prompt, each node's environment its own (the path's actions replayed on a fresh one), the tolerant parser,
and the failed trajectories shown to the value prompt. The repository's (`--reference DIR`, `reference=True`): its
prompts read from the clone's `hotpot/hotpot.py`, its parsing of a sample, one environment shared by the whole search
(as its global `env` is, so a lookup follows the last search of any branch and a finish's answer stays), and the
quirks of its code kept: docs/reference.md lists them, and where rawreact cannot be the same.
"""

from collections.abc import Callable

from rawreact.agents.lats_prompts import LatsPrompts, value_of
from rawreact.agents.lats_records import Call, Node, Search, chosen_trajectory, trajectory_text
from rawreact.agents.record import Trajectory
from rawreact.core.actions import Action, Verbs, parse_step
from rawreact.core.metrics import exact_match
from rawreact.models.base import Completion, Model, keep_prefix

# The repository's defaults (hotpot/lats.sh and lats.py).
SAMPLES, VALUES, ITERATIONS, TEMPERATURE = 5, 1, 30, 1.0
DEPTH, ROLLOUT_DEPTH, ROLLOUT_SAMPLES = 7, 4, 5  # expand_node's `depth >= 7`; rollout's max_depth=4 and n = 5
MAX_TOKENS = 100  # models.gpt's max_tokens
STOP = "Observation"  # generate_new_states' stop
# Stands for a question and its steps: a prompt made around it, cut there, is what the prompts of a kind share (the
# exemplars, the reflections so far), with every other field filled as a real prompt fills it; the repository's
# value template names `{s}` in its instruction, filled with "", so a head cut at its first field ended in a token
# (" ") that no prompt has (' "').
MARK = "\x00"
REFLECTING = 4  # reflections are written while there are fewer than this many distinct failed trajectories
EMPTY_TRIES = 8  # rawreact's own rules: expansions in a row that give no step before the node counts as terminal


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
        if reference:  # one environment for the whole search, as lats.py's global `env`, going on after a finish
            env.reset()
            env.goes_on = True

    def _node(self, parent: Node | None, **fields) -> Node:
        node = Node(len(self.nodes), parent, 0 if parent is None else parent.depth + 1, **fields)
        self.nodes.append(node)
        return node

    def _keep_head(self, prompt: str, fixed: str) -> None:
        """Tell the model, just before asking, that `prompt` begins with `fixed` (what the prompts of its kind share
        while the reflections stay the same: see MARK), where it does. The model keeps the heads used last (two), so
        the expansion's and the value's stay computed, and each call evaluates only its question and steps."""
        if fixed and prompt.startswith(fixed):
            keep_prefix(self.model, fixed)

    def _sample(self, kind: str, prompt: str, n: int, stop: list[str], fixed: str = "") -> list[Completion]:
        # lats.py's reflections call the model without the run's temperature (models.gpt's default, 1.0)
        temperature = TEMPERATURE if self.reference and kind == "reflect" else self.temperature
        self._keep_head(prompt, fixed)
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
                found.append(trajectory_text(failed["trajectory"]))
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
        fixed = self.prompts.expand(MARK, self.reflections).partition(MARK)[0]  # the part no question changes
        made = self._sample("expand", self.prompts.expand(x + ("" if self.reference else "\n") + head,
                                                          self.reflections), n, [STOP], fixed)  # fmt: skip
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
        failed = self.unique_failed()
        prompts = {text: self.prompts.value(text, failed, self.reflections) for text in texts}
        asked = list(dict.fromkeys(p for p in prompts.values() if p not in self.value_cache))
        first = {prompt: len(self.calls) + k * self.values for k, prompt in enumerate(asked)}  # each one's first call
        fixed = self.prompts.value(MARK, failed, self.reflections).partition(MARK)[0]
        for prompt, made in zip(asked, self._sample_each("value", asked, self.values, fixed), strict=True):
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

    def _sample_each(self, kind: str, prompts: list[str], n: int, fixed: str = "") -> list[list[Completion]]:
        """`n` samples of each prompt, as `_sample` of each in turn would draw them; single samples of several
        prompts decoded side by side where the model can (the embedded one: `sample_each`)."""
        each = getattr(self.model, "sample_each", None)
        if n != 1 or len(prompts) < 2 or each is None:
            return [self._sample(kind, prompt, n, [], fixed) for prompt in prompts]
        self._keep_head(prompts[0], fixed)
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


def em_reward(gold: str) -> Callable[[str | None, list[Node]], float]:
    """The `em` evaluator: 1 when the answer matches the gold answer (the paper's setting: an oracle)."""
    return lambda answer, path: float(bool(answer is not None and exact_match(answer, gold)))


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
