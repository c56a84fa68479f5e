"""LATS (issue 58): tree search over ReAct steps. Its rules under `--loop reference` are those of its repository's
`hotpot/lats.py`, restated here in this test's own words and replayed against rawreact on twenty questions'
searches, every call compared; the checkout is a stand-in in the repository's layout, written for this test (no
LATS text). rawreact's own rules, the records, the settings and a real-model run through the command line."""

import json
import math
import re
from pathlib import Path

import pytest

from rawreact import DataError, ScriptedModel, Settings, read_run, solve
from rawreact.agents.lats import MARK
from rawreact.agents.lats_prompts import reference_prompts, value_of, words
from rawreact.agents.lats_records import trajectory_text
from rawreact.cli.app import main
from rawreact.core.metrics import normalize_answer
from rawreact.tasks.hotpotqa import from_rows

# The stand-in checkout's prompts: the six strings its HotPotQATask formats, in this test's words.
STRINGS = {
    "cot_prompt": "Answer by steps.\n{input}",
    "cot_prompt_short": "Answer.\n{input}",
    "cot_prompt_feedback": "Answer by steps; earlier tries failed:\n{trajectories}\nNow:\n{input}",
    "cot_prompt_feedback_short": "Answer; failed:\n{trajectories}\n{input}",
    "value_prompt_reasoning": "Rate the attempt, ending with a score {s}.\n{input}",
    "reflection_prompt": "Say what went wrong.\n{trajectory}Reflection:",
}


def _checkout(folder: Path, strings: dict[str, str] = STRINGS) -> Path:
    (folder / "hotpot").mkdir(parents=True)
    code = "".join(f"{name} = '''{text}'''\n\n" for name, text in strings.items())
    (folder / "hotpot" / "hotpot.py").write_text(code)
    return folder


# lats.py, restated. One environment serves the whole search of a question; the model is sampled n times a call.


class Restated:
    def __init__(self, question: str, gold: str, env, model, samples: int = 5, values: int = 1) -> None:
        self.x, self.gold, self.env, self.model = f"Question: {question}", gold, env, model
        self.samples, self.values = samples, values
        self.failed, self.reflections, self.cache = [], [], {}
        env.reset()

    def gpt(self, prompt: str, n: int = 1, stop=None) -> list[str]:
        return [c.text for c in self.model.sample(prompt, n=n, temperature=1.0, seed=0, stop=stop or [],
                                                  max_tokens=100)]  # fmt: skip

    @staticmethod
    def node(parent, **state):
        return {"parent": parent, "state": {"thought": "", "action": "", "observation": ""} | state,
                "children": [], "visits": 0, "value": 0.0, "terminal": False, "reward": 0,
                "depth": 0 if parent is None else parent["depth"] + 1}  # fmt: skip

    def chain(self, n) -> list:
        out = []
        while n is not None:
            out.append(n)
            n = n["parent"]
        return out[::-1]

    def text(self, n) -> str:  # the question, then each non-root node's lines
        parts = []
        for m in self.chain(n):
            s, d = m["state"], m["depth"]
            seg = ([f"Thought {d}: {s['thought']}"] if s["thought"] else []) + (
                [f"Action {d}: {s['action']}"] if s["action"] else []
            )
            seg += [f"Observation {d}: {s['observation']}"] if s["observation"] and d != 0 else []
            parts.append("\n".join(seg))
        return self.x + "\n".join(parts)

    @staticmethod
    def as_str(m) -> str:
        s = m["state"]
        return (f"Node(depth={m['depth']}, value={m['value']:.2f}, visits={m['visits']}, thought={s['thought']}, "
                f"action={s['action']}, observation={s['observation']})")  # fmt: skip

    def unique(self) -> list[str]:
        found, answers = [], set()
        for f in self.failed:
            if f["answer"] not in answers:
                lines = []
                for line in f["trajectory"].split("\n"):
                    try:
                        depth = int(line.split(",")[0].split("=")[1].strip())
                        th = line.split(", thought=")[1].split(", action=")[0].strip()
                        ac = line.split(", action=")[1].split(", observation=")[0].strip()
                        ob = line.split(", observation=")[1].split(")")[0].strip()
                    except IndexError:
                        continue
                    if depth:
                        lines += [f"Thought {depth}: {th}"] * bool(th) + [f"Action {depth}: {ac}"] * bool(ac)
                        lines += [f"Observation {depth}: {ob}"] * bool(ob)
                found.append("\n".join(lines))
                answers.add(f["answer"])
            if len(found) >= 5:
                break
        return found

    def expand_prompt(self, inp: str) -> str:
        if not self.reflections:
            return STRINGS["cot_prompt"].format(input=inp)
        blocks = "".join(r["trajectory"] + "FAILED TRAJECTORY\nReflection: " + r["reflection"] + "\n\n"
                         for r in self.reflections)  # fmt: skip
        return STRINGS["cot_prompt_feedback"].format(trajectories=blocks, input=inp)

    def new_states(self, n_node, n):
        x = self.text(n_node)
        uniq = self.unique()
        if len(self.reflections) < len(uniq) < 4:
            texts = "\n".join(f"{x}\n{t}\n" for t in uniq)
            self.reflections = []
            for t in ["Question: " + part for part in texts.split("Question: ")[1:]]:
                said = self.gpt(STRINGS["reflection_prompt"].format(trajectory=t))[0]
                self.reflections.append({"trajectory": t, "reflection": said})
        y = f"Thought {n_node['depth'] + 1}: "
        made, seen = [], set()
        for sample in self.gpt(self.expand_prompt(x + y), n=n, stop=["Observation"]):
            lines = (y + sample).split("\n")
            th = next((ln.split(":")[1].strip() for ln in lines if ln.startswith(f"Thought {n_node['depth'] + 1}")), "")
            ac = next((ln.split(":")[1].strip() for ln in lines if ln.startswith("Action") and ":" in ln), None)
            if f"{th}::{ac}" in seen:
                continue
            if ac:
                verb = ac.split("[")[0] if "[" in ac else ac
                arg = ac.split("[")[1].split("]")[0] if "[" in ac else ""
                obs, done = self.env.step(f"{verb.lower()}[{arg}]")
                answer = self.env.answer
                r = int(answer is not None and normalize_answer(answer) == normalize_answer(self.gold))
                if done:
                    obs = f"Episode finished, reward = {r}\n"
                child = self.node(n_node, thought=th, action=ac, observation=obs)
                child["terminal"], child["reward"] = r == 1 or done, r
                seen.add(f"{th}::{ac}")
                made.append(child)
                if child["terminal"] and r == 0:
                    self.failed.append({"trajectory": "\n".join(self.as_str(m) for m in self.chain(child)),
                                        "answer": f"{verb.lower()}[{arg}]"})  # fmt: skip
        return made

    def values_of(self, kids) -> list[float]:
        out, local = [], {}
        for k in kids:
            y = self.text(k)
            if y in local:
                out.append(0)
                continue
            prompt = STRINGS["value_prompt_reasoning"].format(s="", input=y + "\nThis trajectory is ")
            if prompt not in self.cache:
                said = self.gpt(prompt, n=self.values)[0]
                self.cache[prompt] = next((v for d, v in [(str(i), i / 10) for i in range(10, 0, -1)] if d in said), -1)
            local[y] = self.cache[prompt]
            out.append(self.cache[prompt])
        return out

    def select(self, root):
        n = root
        while n and n["children"]:
            ends = [c for c in n["children"] if c["terminal"]]
            if len(ends) == len(n["children"]):
                if n["parent"]:
                    n["parent"]["children"].remove(n)
                n = n["parent"]
                continue
            won = next((c for c in ends if c["reward"] == 1), None)
            if won:
                return won

            def uct(c):
                if c["visits"] == 0:
                    return c["value"]
                return c["value"] / c["visits"] + math.sqrt(2 * math.log(c["parent"]["visits"]) / c["visits"])

            n = max((c for c in n["children"] if not c["terminal"]), key=uct, default=None)
        return n

    def run(self, iterations: int = 30):
        root = self.node(None)
        for _ in range(iterations):
            n, tries = self.select(root), 0
            while n is None or (n["terminal"] and n["reward"] != 1):
                n, tries = self.select(root), tries + 1
                if tries > 1000:  # lats.py would wait here for ever: every path is spent
                    return "exhausted"
            if n["terminal"] and n["reward"] == 1:
                return n
            if n["depth"] >= 7:
                n["terminal"] = True
            else:
                n["children"] += self.new_states(n, self.samples)
            while n["terminal"] or not n["children"]:
                n = self.select(root)
                if n is None:  # lats.py would fail here (None has no depth)
                    return "exhausted"
                if n["depth"] >= 7:
                    n["terminal"] = True
                else:
                    n["children"] += self.new_states(n, self.samples)
            kids = [c for c in n["children"] if not c["terminal"]]
            votes = self.values_of(kids)
            votes += [0] * (len(n["children"]) - len(votes))
            for c, v in zip(n["children"], votes, strict=False):
                c["value"] = v
            m, depth, rewards, reward = max(n["children"], key=lambda c: c["value"]), None, [0], None
            depth = m["depth"]
            while not m["terminal"] and depth < 4:
                states = []
                while not states:
                    states = self.new_states(m, 5)
                end = next((s for s in states if s["terminal"]), None)
                if end is not None:
                    reward, m = end["reward"], end
                    break
                vals = []
                while not vals:
                    vals = self.values_of([s for s in states if not s["terminal"]])
                rewards.append(max(vals))
                m, depth = states[vals.index(max(vals))], depth + 1
                if depth == 4:
                    rewards = [-1]
            if reward is None:
                reward = sum(rewards) / len(rewards)
            if m["reward"] == 1:
                return m
            node = m
            while node is not None:
                node["visits"] += 1
                gain = -1 if node["terminal"] and node["reward"] == 0 else reward
                node["value"] = (node["value"] * (node["visits"] - 1) + gain) / node["visits"]
                node = node["parent"]
            tree, stack = [], [root]  # then any node of the tree that won ends the search, the best valued first
            while stack:
                node = stack.pop()
                tree.append(node)
                stack += node["children"][::-1]
            winners = [w for w in tree if w["terminal"] and w["reward"] == 1]
            if winners:
                return max(winners, key=lambda w: w["value"])
        return None


class Recorded(ScriptedModel):
    """A scripted model that keeps each prompt it is sent, in order."""

    def __init__(self, reply) -> None:
        super().__init__(reply)
        self.sent = []

    def complete(self, prompt, **options):
        self.sent.append(prompt)
        return super().complete(prompt, **options)


def replies(gold: str, titles: list[str], offset: int = 0):
    """A model of many habits, by the count of its calls: thoughts and actions of every kind (searches found and
    not, lookups, right and wrong finishes, a line with no action, a thought with a colon), values, reflections."""
    count = [0]

    def reply(prompt: str) -> str:
        k = count[0] = count[0] + 1
        if prompt.endswith("Reflection:"):
            return f" I stopped too early, try {k}."
        if prompt.endswith("This trajectory is "):
            return f"fine.\nThus the correctness score is {k % 10 + 1}"
        step = int(re.findall(r"Thought (\d+): $", prompt)[0])
        choices = [
            f"I look up {titles[k % len(titles)]}.\nAction {step}: Search[{titles[k % len(titles)]}]\n",
            f"Maybe the year.\nAction {step}: Lookup[founded]\n",
            f"I know it.\nAction {step}: Finish[{gold if (k + offset) % 9 == 0 else 'maybe ' + gold}]\n",
            f"A guess: it is so.\nAction {step}: Finish[guess {k % 3}]\n",
            "I am not sure what to do\n",
            f"Search elsewhere.\nAction {step}: Search[Nowhere {k % 2}]\n",
        ]
        return " " + choices[(k * 7 + step + offset) % len(choices)]

    return reply


def test_lats_reference_calls_are_the_repositorys_byte_for_byte_on_twenty_questions(rows, tmp_path):
    """On twenty questions' searches with a model of many habits, every call's text, in order, is the one the
    restated rules make, and the search answers what they answer."""
    checkout = _checkout(tmp_path / "LATS")
    data = from_rows(tmp_path / "rows.json", "0" * 64, list(enumerate(rows[:20], 1)), "row")
    found, kinds, sent = 0, set(), 0
    for n, question in enumerate(data.questions):
        titles = list(question.passages)[:4]
        ours = Recorded(replies(question.answer, titles, n))
        options = {"prompts": reference_prompts(str(checkout / "hotpot" / "hotpot.py"), words), "evaluator": "em",
                   "gold": question.answer, "iterations": 6}  # fmt: skip
        out = solve(question.question, data.env(question, loop="reference"), ours, "", method="lats",
                    loop="reference", lats=options)  # fmt: skip
        theirs = Recorded(replies(question.answer, titles, n))
        env = data.env(question, loop="reference")
        env.goes_on = True  # WikiEnv's own: see the test above
        end = Restated(question.question, question.answer, env, theirs).run(6)
        assert ours.sent == theirs.sent, question.id
        ended = "exhausted" if end == "exhausted" else "iterations" if end is None else "found"
        assert out.search.ended == ended, question.id
        found += ended == "found"
        if ended == "found":
            assert out.search.chosen.reward == 1 and out.search.chosen.action == end["state"]["action"]
        kinds.update(call.kind for call in out.search.calls)
        sent += len(ours.sent)
    assert 0 < found < 20  # some searches found the answer, some spent their iterations
    assert kinds == {"expand", "value", "reflect"} and sent > 400  # every kind of call, hundreds of them


class Kept(Recorded):
    """A recorded model that also keeps the head it was last told to keep, and which it was when each prompt came."""

    def __init__(self, reply) -> None:
        super().__init__(reply)
        self.kept, self.heads = "", []

    def keep_prefix(self, text: str) -> None:
        self.kept = text

    def complete(self, prompt, **options):
        self.heads.append(self.kept)
        return super().complete(prompt, **options)


def test_each_call_keeps_all_its_prompt_but_the_question_and_steps(rows, tmp_path):
    """Before each expansion and value the search tells the model the head its prompt begins with: everything but the
    question and its steps, the reflections included (the embedded model then evaluates only those; before, an
    expansion after reflections evaluated them, 1,700 tokens a call on Qwen2.5-Coder-1.5B)."""
    checkout = _checkout(tmp_path / "LATS")
    data = from_rows(tmp_path / "rows.json", "0" * 64, list(enumerate(rows[:6], 1)), "row")
    kinds = {"expand": 0, "value": 0, "reflected": 0}
    for n, question in enumerate(data.questions):
        model = Kept(replies(question.answer, list(question.passages)[:4], n))
        options = {"prompts": reference_prompts(str(checkout / "hotpot" / "hotpot.py"), words), "evaluator": "em",
                   "gold": question.answer, "iterations": 6}  # fmt: skip
        solve(question.question, data.env(question, loop="reference"), model, "", method="lats", loop="reference",
              lats=options)  # fmt: skip
        for prompt, head in zip(model.sent, model.heads, strict=True):
            if prompt.endswith("Reflection:"):  # a reflection's prompt shares nothing with the next one's
                continue
            assert head and prompt.startswith(head), (head, prompt)
            assert prompt[len(head) :].startswith(f"Question: {question.question}"), prompt[len(head) :]
            kind = "value" if prompt.endswith("This trajectory is ") else "expand"
            kinds[kind] += 1
            kinds["reflected"] += " I stopped too early" in head
    assert kinds["expand"] > 50 and kinds["value"] > 50 and kinds["reflected"] > 20, kinds


def test_values_and_failed_trajectories_are_read_as_the_repository_reads_them():
    assert [value_of(t) for t in ("score 10", "is 9.", "7 or 3", "none", "1")] == [1.0, 0.9, 0.7, -1.0, 0.1]
    shown = (
        "Node(depth=0, value=0.00, visits=1, thought=, action=, observation=)\n"
        "Node(depth=1, value=0.50, visits=1, thought=I search, action=Search[A (b)], observation=A is (old) b.)\n"
        "Node(depth=2, value=0.00, visits=0, thought=done, action=Finish[x], "
        "observation=Episode finished, reward = 0\n)"
    )
    assert trajectory_text(shown).split("\n") == [
        "Thought 1: I search", "Action 1: Search[A (b)]", "Observation 1: A is (old",  # it ends at the first `)`
        "Thought 2: done", "Action 2: Finish[x]", "Observation 2: Episode finished, reward = 0",
    ]  # fmt: skip


def test_the_shared_environment_goes_on_after_a_finish_as_wikienv_does(rows, tmp_path):
    """WikiEnv carries out a step after a finish (its check is commented out), and its answer stays: LATS's branches
    after another's finish search on, and are rewarded by that answer."""
    data = from_rows(tmp_path / "rows.json", "0" * 64, list(enumerate(rows[:1], 1)), "row")
    [question] = data.questions
    env = data.env(question, loop="reference")
    env.goes_on = True
    assert env.step("finish[nothing]") == ("Episode finished, reward = 0\n", True)
    title = list(question.passages)[0]
    observation, done = env.step(f"search[{title}]")
    assert not done and observation.startswith("The ") and env.answer == "nothing"


# rawreact's own rules, and runs.


def _orlo(folder: Path) -> None:
    """A question on one passage, and a model that searches, guesses wrong, values, then answers right."""
    passages = {"Orlo": "Orlo is a fishing village. It holds a lantern festival every October."}
    (folder / "q.json").write_text(json.dumps({"passages": passages, "questions": [
        {"id": "orlo", "question": "When is the festival of Orlo held?", "answer": "October"}]}))  # fmt: skip
    script = [" I search Orlo.\nAction 1: Search[Orlo]\n", " I guess.\nAction 1: Finish[May]\n",
              " Thus the correctness score is 8", " The festival is in October.\nAction 2: Finish[October]\n",
              " Thus the correctness score is 9"] * 20  # fmt: skip
    (folder / "s.json").write_text(json.dumps(script))


def test_own_rules_search_finds_the_answer_and_records_the_tree(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _orlo(tmp_path)
    args = ["run", "q.json", "--method", "lats", "--model", "scripted:s.json", "--lats-samples", "2"]
    args += ["--out", "l.jsonl"]
    assert main(args) == 0
    said = capsys.readouterr().out
    assert "method lats (30 iterations, 2 samples an expansion" in said and "an oracle" in said
    [record] = read_run(tmp_path / "l.jsonl")[1]
    assert record["prediction"] == "October" and record["em"] == 1.0 and record["ended"] == "finish"
    tree = record["lats"]
    assert tree["ended"] == "found" and tree["nodes"][0]["parent"] is None
    kinds = set(tree["calls"])
    assert {"expand", "value"} <= kinds and record["model_calls"] == len(tree["calls"])
    assert sum(c["calls"] for c in tree["cost"].values()) == len(tree["calls"])
    chosen = tree["nodes"][tree["chosen"]]
    assert chosen["action"] == "Finish[October]" and chosen["reward"] == 1.0
    steps = record["trajectory"]["steps"]
    assert [s["action_text"] for s in steps][-1] == "Finish[October]" and record["steps"] == len(steps)
    capsys.readouterr()
    assert main(["report", "l.jsonl"]) == 0  # the searches' cost, a row a kind of call
    said = capsys.readouterr().out
    expand = tree["cost"]["expand"]["calls"]
    assert re.search(rf"l\.jsonl +1 +100% +\d+\.0 +{len(tree['nodes'])}\.0 +expand +{expand}\.0 ", said), said


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"method": "react", "iterations": 3}, "iterations apply to --method lats only"),
        ({"method": "lats", "grammar": "step"}, "LATS samples its steps without a grammar"),
        ({"method": "lats", "loop": "reference"}, "give --lats-prompts"),
        ({"method": "lats", "evaluator": "won"}, "LATS rewards a finish by em or supported"),
        ({"method": "lats", "trials": 3}, "trials apply to the Reflexion methods only"),
        ({"method": "lats", "repeats": "stop"}, "LATS"),
    ],
)
def test_lats_settings_that_cannot_work_are_refused(given, said):
    with pytest.raises(DataError, match=re.escape(said)):
        Settings(**given)


def test_a_real_lats_search_runs_on_the_embedded_model(tmp_path, monkeypatch, gemma):
    monkeypatch.chdir(tmp_path)
    args = ["run", "--method", "lats", "--limit", "1", "--iterations", "1", "--lats-samples", "2", "--rollout-depth",
            "2", "--threads", "1", "--out", "real.jsonl", "-q"]  # fmt: skip
    assert main(args) == 0
    [record] = read_run(tmp_path / "real.jsonl")[1]
    tree = record["lats"]
    assert tree["iterations"] == 1 and "expand" in tree["calls"] and record["model_calls"] == len(tree["calls"])
    assert record["ended"] in ("finish", "spent") and len(tree["nodes"]) >= 1
    # Every expansion starts from the kept state of its prompt's fixed head (the exemplars): the model evaluates the
    # question and steps after them. Before, each expansion evaluated its whole prompt, exemplars and all.
    from rawreact import load_prompt

    expand, exemplars = tree["cost"]["expand"], len(gemma.tokenize(load_prompt().text))
    assert 0 < expand["evaluated"] / (expand["calls"] / 2) < exemplars / 2, (expand, exemplars)


def test_reference_values_and_expansions_start_from_their_kept_exemplars(rows, tmp_path, gemma):
    """The repository's value template names `{s}` in its instruction (`"...score is {s}", where s is ...`) and LATS
    fills it with "". A head kept up to that field ended in a token (" ") that the prompts never have (' "'), so every
    value call evaluated its whole prompt, exemplars and all: 2,100 tokens a call, 80 CPU-seconds, on
    Qwen2.5-Coder-1.5B. The head now runs to the trajectory, and each call tells the model which head it starts from."""
    solved = "".join(f"Question: What is {n} and {n}?\nThought 1: {n} and {n} make {2 * n}.\n"
                     f"Action 1: Finish[{2 * n}]\nThus the correctness score is 10\n\n"
                     for n in range(1, 30))  # fmt: skip
    value = (
        f'Rate the attempt. End with "Thus the correctness score is {{s}}", where s is 1 to 10.\n\n{solved}{{input}}'
    )
    from rawreact import load_prompt

    steps = load_prompt().text.replace("{", "{{").replace("}", "}}") + "{input}"  # exemplars the model follows
    checkout = _checkout(tmp_path / "LATS", dict(STRINGS, cot_prompt=steps, value_prompt_reasoning=value))
    prompts = reference_prompts(str(checkout / "hotpot" / "hotpot.py"), lambda text: len(gemma.tokenize(text)))
    value_head = prompts.value(MARK, [], []).partition(MARK)[0]  # what the search keeps for its values
    head = len(gemma.tokenize(value_head))
    assert value_head.endswith(solved) and head > 700  # the exemplars, not the instruction's first line
    data = from_rows(tmp_path / "rows.json", "0" * 64, list(enumerate(rows[:1], 1)), "row")
    [question] = data.questions
    options = {"prompts": prompts, "evaluator": "em", "gold": question.answer, "iterations": 2, "samples": 2,
               "rollout_depth": 1, "max_tokens": 60}  # fmt: skip
    out = solve(question.question, data.env(question, loop="reference"), gemma, "", method="lats", loop="reference",
                lats=options)  # fmt: skip
    kinds = {"value": [], "expand": []}
    for call in out.search.calls:
        if call.completion.evaluated_tokens:  # a sample's first: the others share its prompt's cells
            kinds[call.kind].append((call.completion.evaluated_tokens, call.completion.prompt_tokens))
    values, expansions, steps = (
        kinds["value"],
        kinds["expand"],
        len(gemma.tokenize(prompts.expand(MARK, []).partition(MARK)[0])),
    )
    assert len(values) >= 4 and len(expansions) >= 2, kinds
    # The first calls of a kind compute its head (the first two values decode side by side as it is computed);
    # every later call evaluates only what follows the head.
    assert all(evaluated <= tokens - head for evaluated, tokens in values[2:]), values
    assert all(evaluated <= tokens - steps for evaluated, tokens in expansions[1:]), expansions


def test_values_of_siblings_decode_side_by_side_and_samples_one_by_one_give_the_same_tokens(gemma):
    """The sampling context's two ways and their baselines (benchmarks/lats.py): requests whose tokens are forced
    write the same tokens side by side as one after another, in fewer passes; and `sample_each` draws one seeded
    sample of each prompt, the same again for the same seeds."""
    from rawreact.models.batch import Request

    prompts = [f"Question: What colour is the {thing}?\nThought 1:" for thing in ("sea", "sky at dusk", "grass")]
    first = gemma.sample_each(prompts, temperature=1.0, seeds=[4, 5, 6], stop=["\n"], max_tokens=12)
    again = gemma.sample_each(prompts, temperature=1.0, seeds=[4, 5, 6], stop=["\n"], max_tokens=12)
    assert [c.text for c in first] == [c.text for c in again]
    assert [c.prompt_tokens for c in first] == [len(gemma.tokenize(p)) for p in prompts]
    written = [gemma.tokenize(c.text, bos=False) for c in first]
    engine = next(iter(gemma._samplers.values()))

    def forced(tokens):
        at = iter(tokens)
        return lambda logits: next(at, -1)

    passes = {}
    for together in (True, False):
        requests = [Request(p, gemma.tokenize(p), forced(w), [], 12) for p, w in zip(prompts, written, strict=True)]
        before = engine.stats.passes
        engine.side_by_side(requests, together=together)
        passes[together] = engine.stats.passes - before
        assert [r.completion for r in requests] == written
        samples = [Request(prompts[0], gemma.tokenize(prompts[0]), forced(w), [], 12) for w in written]
        before = engine.stats.passes
        engine.fork(samples, together=together)
        passes[together, "fork"] = engine.stats.passes - before
        assert [r.completion for r in samples] == written  # each fork wrote its own forced tokens
    longest = max(len(w) for w in written)
    assert passes[True, "fork"] <= longest + 1 < sum(len(w) for w in written) <= passes[False, "fork"] + len(written)
    assert passes[True] < passes[False]


def test_reference_dir_sets_up_lats_from_a_clone_and_says_so(rows, tmp_path, monkeypatch, capsys):
    """`--method lats --reference DIR`: the clone's prompts under lats.py's rules, said part by part, the prompt
    file's SHA-256 in the manifest; every call is the restated rules' (the test above), here through the CLI."""
    checkout = _checkout(tmp_path / "LATS")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.json").write_text(json.dumps(rows[:2]))
    script = {"completions": [" I know it.\nAction 1: Finish[x]\n", "Thus the correctness score is 5"] * 200}
    (tmp_path / "s.json").write_text(json.dumps(script))
    args = ["run", "rows.json", "--method", "lats", "--reference", str(checkout), "--iterations", "2",
            "--model", "scripted:s.json", "--out", "r.jsonl"]  # fmt: skip
    assert main(args) == 0
    said = capsys.readouterr().out
    assert f"LATS's setup from {checkout} (--reference)" in said and "lats.py's search, byte for byte" in said
    manifest = json.loads((tmp_path / "r.jsonl.manifest.json").read_text())
    assert manifest["settings"]["loop"] == "reference" and manifest["settings"]["lats_prompts"].endswith("hotpot.py")
    assert list(manifest["reference"]["files"]) == ["hotpot/hotpot.py"]
    records = read_run(tmp_path / "r.jsonl")[1]
    first = records[0]["lats"]
    assert first["nodes"][1]["observation"] == "Episode finished, reward = 0\n"  # WikiEnv's wrapper's words
    assert main([*args[:-2], "--out", "r2.jsonl", "--reference", str(tmp_path)]) == 2
    assert "no hotpot/hotpot.py there" in capsys.readouterr().err


def test_the_page_draws_each_search_as_a_tree_with_its_chosen_path(tmp_path, monkeypatch, browser):
    """In Chromium: a circle for each node, the chosen node's path (its ancestors and it) drawn thick, the
    rollouts' nodes apart, and the picture inside the page's width (it scrolls in its own figure if wider)."""
    monkeypatch.chdir(tmp_path)
    _orlo(tmp_path)
    assert main(["run", "q.json", "--method", "lats", "--model", "scripted:s.json", "--out", "l.jsonl", "-q"]) == 0
    assert main(["report", "l.jsonl", "--html", "page.html"]) == 0
    [record] = read_run(tmp_path / "l.jsonl")[1]
    tree = record["lats"]
    browser.open(tmp_path / "page.html")
    drawn = browser.evaluate("Array.from(document.querySelectorAll('figure.tree circle')).map(c => "
                              "[Number(c.dataset.node), c.classList.contains('chosen')])")  # fmt: skip
    path, node = set(), tree["chosen"]
    while node is not None:
        path.add(node)
        node = tree["nodes"][node]["parent"]
    assert sorted(n for n, _ in drawn) == [n["id"] for n in tree["nodes"]]
    assert {n for n, chosen in drawn if chosen} == path and len(path) >= 3  # root, steps, the right finish
    assert browser.evaluate("document.querySelector('figure.tree').getBoundingClientRect().right") <= 1280
    said = browser.evaluate("document.body.innerText")
    assert "Search trees" in said and "A rollout takes the first terminal sample of its step" in said
    browser.screenshot(tmp_path / "tree.png")
    assert (tmp_path / "tree.png").stat().st_size > 10_000


def test_a_lats_run_resumes_after_a_kill_keeping_each_finished_question(tmp_path):
    """Killed outright after its first question, a LATS run resumes: the first record kept as it was, the second
    searched, each with its tree."""
    import os
    import signal
    import subprocess
    import sys

    console = Path(sys.executable).with_name("rawreact")
    script = {"completions": [" I search.\nAction 1: Search[Nowhere]\n", " Thus the correctness score is 4"] * 400,
              "seconds_per_call": 0.01}  # fmt: skip
    (tmp_path / "s.json").write_text(json.dumps(script))
    out = tmp_path / "k.jsonl"
    args = [str(console), "run", "--method", "lats", "--limit", "2", "--iterations", "2", "--model",
            f"scripted:{tmp_path / 's.json'}", "--out", str(out)]  # fmt: skip
    unbuffered = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=unbuffered) as run:
        for line in run.stdout:
            if line.startswith("result [1/2]"):
                run.send_signal(signal.SIGKILL)
                break
    first = out.read_text().splitlines()
    assert len(first) == 1
    done = subprocess.run([*args, "--resume"], capture_output=True, text=True, env=unbuffered)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and records[0] == json.loads(first[0]) and all(r["lats"]["nodes"] for r in records)


def test_resume_refuses_a_lats_run_with_other_settings_or_another_value_prompt(tmp_path, monkeypatch, capsys):
    """The LATS settings and its prompts (by content) are in the manifest's config, as a Reflexion run's are: a
    resume with other iterations, or an edited value prompt, would mix two runs, and is refused."""
    monkeypatch.chdir(tmp_path)
    _orlo(tmp_path)
    (tmp_path / "value.txt").write_text("Score the attempt from 1 to 10.\n\n")
    args = ["run", "q.json", "--method", "lats", "--model", "scripted:s.json", "--value-prompt", "value.txt", "-q"]
    assert main([*args, "--iterations", "2", "--out", "l.jsonl"]) == 0
    config = json.loads((tmp_path / "l.jsonl.manifest.json").read_text())["config"]
    assert config["iterations"] == 2 and config["lats_prompts"].startswith("value.txt + ")
    assert main([*args, "--iterations", "2", "--out", "l.jsonl", "--resume"]) == 0  # the same: resumed
    capsys.readouterr()
    assert main([*args, "--iterations", "3", "--out", "l.jsonl", "--resume"]) == 2
    assert "--resume would mix two different runs" in capsys.readouterr().err
    (tmp_path / "value.txt").write_text("Score it.\n\n")
    assert main([*args, "--iterations", "2", "--out", "l.jsonl", "--resume"]) == 2
    assert "lats_prompts_sha256" in capsys.readouterr().err
