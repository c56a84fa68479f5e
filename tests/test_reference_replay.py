"""The reference loop replayed against the notebook's rules, stated here independently of rawreact's
code: generated trajectories over real HotpotQA rows and over passages written to be awkward
(backslash escapes, line breaks, `No. 2`, `!`, `?`, paragraphs of two words) make the same calls
through the Python API and the command line, and every path to `ReferenceEnv` (a dict of text, a
dict of sentence lists, a collection, a store) shows the same observation for the same page.

`Notebook` restates what the notebook's `WikiEnv` and `webthink` do with a page once Wikipedia has
returned its paragraphs: which page a search opens and which titles a miss lists are rawreact's by
design (docs/reference.md), so it takes those from `env.Pages`.
"""

import json
import random
import subprocess
import sys
import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from rawreact import ScriptedModel, load_prompt, read_run
from rawreact.agents.methods import solve
from rawreact.agents.record import Trajectory
from rawreact.environments.build import build_store
from rawreact.environments.env import Pages
from rawreact.environments.reference import ReferenceEnv, page_text
from rawreact.environments.store import PassageStore
from rawreact.tasks.collection import Collection, Question
from rawreact.tasks.corpus import read_sources

PROMPT = load_prompt().text  # what `rawreact run --loop reference` sends by default
RAWREACT = [sys.executable, "-m", "rawreact"]


def _unescape(p: str) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return p.encode().decode("unicode-escape").encode("latin1").decode("utf-8")
    except UnicodeError:
        return p  # where the notebook raises, rawreact keeps the text (docs/reference.md)


class Notebook:
    """The notebook's environment and loop over `paragraphs` (title -> the paragraphs of its page)."""

    def __init__(self, paragraphs: dict[str, list[str]], gold: str) -> None:
        self.paragraphs, self.gold = paragraphs, gold
        self.index = Pages({title: " ".join(ps) for title, ps in paragraphs.items()})
        self.page, self.keyword, self.found, self.count, self.answer = None, None, [], 0, None

    @staticmethod
    def sentences(page: str) -> list[str]:
        pieces = []
        for p in [p.strip() for p in page.split("\n") if p.strip()]:
            pieces += p.split(". ")
        return [s.strip() + "." for s in pieces if s.strip()]

    def step(self, action: str) -> tuple[str, bool]:
        action = action.strip()
        if self.answer is not None:
            return self.obs, True
        if action.startswith("search[") and action.endswith("]"):
            entity = action[7:-1]
            title = next((t for t in self.paragraphs if t.lower() == " ".join(entity.split()).lower()), None)
            if title is None:
                similar = [_unescape(t) for t in self.index.similar(entity)]
                self.obs = f"Could not find {entity}. Similar: {similar}."
            else:
                self.page = "".join(_unescape(p.strip()) + "\n" for p in self.paragraphs[title]
                                    if len(p.strip().split(" ")) > 2)  # fmt: skip
                self.obs = " ".join(self.sentences(self.page)[:5])
                self.keyword = self.found = self.count = None
        elif action.startswith("lookup[") and action.endswith("]"):
            keyword = action[7:-1]
            if self.keyword != keyword:
                self.keyword, self.count = keyword, 0
                page = self.sentences(self.page) if self.page is not None else []
                self.found = [s for s in page if keyword.lower() in s.lower()]
            if self.count >= len(self.found):
                self.obs = "No more results.\n"
            else:
                self.obs = f"(Result {self.count + 1} / {len(self.found)}) {self.found[self.count]}"
                self.count += 1
        elif action.startswith("finish[") and action.endswith("]"):
            self.answer = action[7:-1]
            normal = [_normal(x) for x in (self.answer, self.gold)]
            self.obs = f"Episode finished, reward = {int(normal[0] == normal[1])}\n"
            return self.obs, True
        elif action.startswith("think[") and action.endswith("]"):
            self.obs = "Nice thought."
        else:
            self.obs = f"Invalid action: {action}"
        return self.obs, False

    def webthink(self, question: str, completions: list[str]) -> tuple[list[str], str]:
        """The prompts of every call, and the final transcript."""
        prompt, calls, replies, done = PROMPT + f"Question: {question}\n", [], iter(completions), False
        for i in range(1, 8):
            calls.append(prompt + f"Thought {i}:")
            text = next(replies).split(f"\nObservation {i}:")[0]
            try:
                thought, action = text.strip().split(f"\nAction {i}: ")
            except ValueError:
                thought = text.strip().split("\n")[0]
                calls.append(prompt + f"Thought {i}: {thought}\nAction {i}:")
                action = next(replies).split("\n")[0].strip()
            obs, done = self.step(action[0].lower() + action[1:])
            prompt += (
                f"Thought {i}: {thought}\nAction {i}: {action}\nObservation {i}: {obs.replace(chr(92) + 'n', '')}\n"
            )
            if done:
                break
        return calls, prompt


def _normal(text: str) -> str:
    from rawreact.core.metrics import normalize_answer

    return normalize_answer(text)


AWKWARD = {
    "Orlo": ["Orlo is No. 2 of the villages. It lies on the lake!", "Two words", "Is it small? Yes. It is small."],
    "Veshna": ["Lake Veshna is fed by the Tam.\\nThe Tam rises in the hills.", "Its\\tdepth is 40 m. Deep."],
    "Dallow": ["Dallow has a market. Prices in C:\\Users are odd.", "The caf\\u00e9 is \\u00e9 closed."],
    "Tam (river)": ["The Tam is a river.", "It is 80 km long. It ends in the sea."],
}


def _episode(rng: random.Random, titles: list[str], words: list[str], gold: str, fallbacks: bool) -> list[str]:
    """Completions of seven steps: searches (hits and misses), lookups, thoughts, finishes, and (with
    `fallbacks`) steps without an action line, each followed by the fallback call's completion."""
    completions = []
    for i in range(1, 8):
        kind = rng.random()
        if kind < 0.35:
            action = f"Search[{rng.choice(titles + [t + 'x' for t in titles])}]"
        elif kind < 0.7:
            action = f"Lookup[{rng.choice(words)}]"
        elif kind < 0.8:
            action = f"Think[{rng.choice(words)}]"
        elif kind < 0.9 and fallbacks:  # no action line: the fallback call asks for it
            completions += [f" I wonder about {rng.choice(words)}.", f" Search[{rng.choice(titles)}]"]
            continue
        else:
            action = f"Finish[{rng.choice([gold, rng.choice(words)])}]"
        completions.append(f" I check {rng.choice(words)}.\nAction {i}: {action}")
    return completions


def _cases(hotpotqa):
    rng = random.Random(5)
    cases = []
    for row in hotpotqa[:30]:
        paragraphs = {title: ["".join(sentences)] for title, sentences in row["context"]}
        words = [w.strip(".,") for s in row["context"][0][1] for w in s.split()][:12] or ["the"]
        q = Question(row.get("_id", row["question"]), row["question"], row["answer"], passages=dict(row["context"]))
        cases.append((q, paragraphs, _episode(rng, list(paragraphs), words, row["answer"], fallbacks=False)))
    words = ["lake", "Tam", "No", "small", "depth", "café", "market", "Users", "sea"]
    for n in range(20):
        passages = {title: "\n".join(ps) for title, ps in AWKWARD.items()}
        q = Question(f"a{n}", f"Where does the Tam end ({n})?", "the sea", passages=passages)
        cases.append((q, AWKWARD, _episode(rng, list(AWKWARD), words, "the sea", fallbacks=True)))
    return cases


def test_generated_episodes_make_the_notebooks_calls_through_the_python_api_and_the_cli(hotpotqa, tmp_path):
    cases = _cases(hotpotqa)
    rows, scripts = [], {}
    for q, paragraphs, completions in cases:
        calls, transcript = Notebook(paragraphs, q.answer).webthink(q.question, completions)
        model = ScriptedModel(completions)
        env = Collection("t", {}, (q,), "hotpotqa").env(q, loop="reference")
        traj = solve(q.question, env, model, PROMPT, loop="reference").trajectory
        assert [h["prompt"] for h in model.history] == calls, q.id
        assert traj.transcript() == transcript
        if q.id.startswith("a"):
            continue
        rows.append(next(r for r in hotpotqa if r.get("_id", r["question"]) == q.id))
        scripts[q.question] = (completions, transcript)
    # The command line: a question file of the same rows, the same completions by question and step.
    data, out, script = tmp_path / "dev.json", tmp_path / "run.jsonl", tmp_path / "s.json"
    data.write_text(json.dumps(rows))
    script.write_text(json.dumps({"questions": {question: c for question, (c, _) in scripts.items()}}))
    command = [*RAWREACT, "run", str(data), "--loop", "reference", "--model", f"scripted:{script}"]
    done = subprocess.run([*command, "--out", str(out), "-q"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    records = read_run(out)[1]
    assert len(records) == len(rows)
    for record in records:
        assert Trajectory.from_dict(record["trajectory"]).transcript() == scripts[record["question"]][1]


AWKWARD_TEXT = st.lists(
    st.sampled_from(list("ab .!?\\nN2o\u00e9\t") + ["No. 2", ". ", "\\n", "\\t", "\\u00e9", " x y z", "\n"]),
    max_size=20,
).map("".join)


@settings(max_examples=80)
@given(st.lists(AWKWARD_TEXT, min_size=1, max_size=4), st.sampled_from(["lead", "plain"]))
def test_every_path_to_the_reference_environment_shows_the_same_page(tmp_path_factory, sentences, layout):
    """A dict of sentence lists, the same as text, a collection and a store show the same search and lookup."""
    if layout == "lead":  # HotpotQA's layout: every later sentence carries the space before it
        sentences = [sentences[0]] + [" " + s.lstrip() for s in sentences[1:]]
    if not "".join(sentences).strip():
        return
    text = page_text(sentences)
    folder = tmp_path_factory.mktemp("store")
    corpus = folder / "c.jsonl"
    corpus.write_text(json.dumps({"title": "Page", "sentences": sentences}) + "\n")
    build_store(read_sources([corpus]), folder / "s.sqlite")
    q = Question("q", "Q?", "a", passages={"Page": sentences})
    envs = [
        ReferenceEnv({"Page": sentences}),
        ReferenceEnv({"Page": text}),
        Collection("t", {}, (q,), "hotpotqa").env(q, loop="reference"),
        ReferenceEnv(PassageStore(folder / "s.sqlite")),
    ]
    seen = []
    for env in envs:
        seen.append([env.step("search[Page]")[0], env.step("lookup[a]")[0], env.step("lookup[a]")[0]])
    assert all(s == seen[0] for s in seen)
