"""Task types as declarations: what kind of question a run asks, how it is scored, and how its outcome reads.

An environment declares its verbs (`core.verbs`); a task type declares the rest of a benchmark: its name
(a record's `task`), the word for one of its items, the header of its question line, the shipped prompts'
folder, its scores (each with its range, and whether it is a share of 0/1 outcomes, with Wilson's
interval, or a mean, with the bootstrap; the first is the headline), where its scores come from (the
answer against the gold answer, a label against the gold label, or the environment's own outcome), the
fields a record of it adds, its step limit, and the reference repository's files for it. Records,
`report`, `compare`, `compare-runs`, `show`, the page, export and the inspect log read these
declarations, and no module outside this one tests a task type by its name (tests/test_layers.py). A
benchmark of another kind is one more declaration here.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Score:
    """One score of a task type: the record's field, its name in tables, and how it is summed up."""

    key: str
    label: str
    share: bool  # a share of 0/1 outcomes (Wilson's interval), or a mean of values in [low, high] (the bootstrap)
    low: float = 0.0
    high: float = 1.0
    said: str = "it is 0 to 1"  # its range in words, for a record that holds another value


@dataclass(frozen=True)
class Reference:
    """What the reference repository (the ReAct paper's code) has for a task type: its prompt file and
    notebook, how a method's prompt key reads there, and the parts of its setup that differ by task."""

    prompt_file: str
    notebook: str
    # A method's reference key ({key}) as the prompt file spells it; {method} is the method; a `{task}` or `{kind}`
    # stays in the key, for each episode to take its own (agents.prompts' TASK_KEY and KIND_KEY).
    key: str = "{key}"
    key_suffix: tuple[str, str] | None = None  # a suffix of the HotpotQA keys spelled otherwise in this file
    methods: tuple[str, ...] | None = None  # the methods it has (None: every method the paper ran)
    notebook_instruction: bool = False  # ReAct's prompt has the notebook's instruction before it
    own_instruction: bool = False  # the prompt file carries its own instruction (nothing is sent before it)
    sampled: bool = True  # the notebooks' 500-question sample, shuffled by random.Random(233)
    shuffle_range: bool = False  # the reproduction protocol shuffles over the notebook's range(7405)
    paper_steps: Mapping[str, int] = field(default_factory=dict)  # step limits the paper gives by method
    frame: str | None = None  # the notebook's string that frames the exemplars (`frame = '...' + d[...] + '...'`)
    max_tokens: int | None = None  # the reference's token limit a call, where it is not the notebooks' 100
    loop_said: str = ""  # its own loop, in the words `describe` says it (a decision-making task's)
    differences: tuple[str, ...] = ()  # what of its setup a run cannot be, in those words

    def prompt_key(self, key: str, method: str) -> str:
        """The key of `method`'s prompt in this file, from its HotpotQA reference key."""
        if self.key_suffix is not None:
            key = key.replace(*self.key_suffix)
        return self.key.replace("{key}", key).replace("{method}", method)  # a `{kind}` stays: each game's own


@dataclass(frozen=True)
class TaskType:
    """A kind of task. `scoring` is where its scores come from: "answer" (EM and F1 of the answer against the
    gold answer; no gold, no score), "label" (the answer against a gold label) or "outcome" (what the
    environment says of the episode: won or not, and its reward). `fields` are the fields a record of it
    adds, with the types they take; `layout` is the layout of a collection whose items are of this type."""

    name: str
    unit: str
    header: str
    prompts: str
    scores: tuple[Score, ...]
    scoring: str
    style: str = "react"  # its transcript: "react" (Thought/Action/Observation lines) or "commands" (a game's)
    layout: str = ""
    benchmark: str = ""
    steps: int | None = None  # its step limit (None: the method's, 7)
    fields: Mapping[str, tuple] = field(default_factory=dict)
    reference: Reference | None = None
    supported: bool = False  # whether an answer is looked for in what the episode read (`supported`)
    own_passages: bool = True  # whether its items can come with passages of their own (else: --passages)
    refused: Mapping[str, str] = field(default_factory=dict)  # what it cannot be run by ("reflexion", "acting")
    methods: tuple[str, ...] | None = None  # the only methods that run it (None: the question methods)
    won: str = "won"  # the ending that is a success, for a task the environment judges
    outcomes: tuple[str, str] = ("won", "not won")  # how a result line names a success and a failure

    @property
    def writes_programs(self) -> bool:
        """Whether its items are problems a method answers with a program (agents.programs), judged by tests."""
        return self.style == "program"

    @property
    def headline(self) -> Score:
        """The score a run is judged by first."""
        return self.scores[0]

    @property
    def keys(self) -> tuple[str, ...]:
        """The record's fields of its scores, the headline first."""
        return tuple(s.key for s in self.scores)

    def step_limit(self, method: str) -> int:
        """The step limit of `method` on this task: the task's own, the paper's for the method, or 7."""
        if self.steps is not None:
            return self.steps
        paper = {} if self.reference is None else self.reference.paper_steps
        return paper.get(method, 7)

    def scored(self, record: Mapping) -> bool:
        """Whether a record has a score: a question without a gold answer has none."""
        return record.get(self.headline.key) is not None

    def outcome(self, record: Mapping) -> str:
        """How a result line names a record's outcome (`record`: its scores by name): "won" or "not won" for an
        outcome that the environment judges, "correct", "wrong" or "not scored (no gold answer)" for an answer."""
        if self.scoring == "outcome":  # the environment's judgement: whether it was won (a program: passed)
            return self.outcomes[0] if record.get("success") else self.outcomes[1]
        value = record.get(self.headline.key)
        return "not scored (no gold answer)" if value is None else "correct" if value else "wrong"


_NUMBER = (int, float)
EM, F1 = Score("em", "EM", share=True), Score("f1", "F1", share=False)
QA = TaskType(
    "qa",
    unit="question",
    header="Question",
    prompts="",
    scores=(EM, F1),
    scoring="answer",
    benchmark="hotpotqa",
    supported=True,
    reference=Reference("prompts/prompts_naive.json", "hotpotqa.ipynb", notebook_instruction=True),
)
FEVER = TaskType(
    "fever",
    unit="question",
    header="Claim",
    prompts="fever/",
    scores=(EM, F1),
    scoring="label",
    layout="fever",
    benchmark="fever",
    fields={"label": (str, None), "lenient_em": _NUMBER},
    own_passages=False,
    refused={
        "reflexion": "the Reflexion methods answer questions; run FEVER claims by other methods",
        "acting": "FEVER claims are checked against Wikipedia: build a store of FEVER's wiki-pages (rawreact index "
        "wiki-pages/ --out fever.sqlite) and give it with --passages fever.sqlite",
    },
    reference=Reference(
        "prompts/fever.json",
        "FEVER.ipynb",
        key_suffix=("_simple6", "_simple3"),
        own_instruction=True,
        shuffle_range=True,
        paper_steps={"react-cot-sc": 5},  # the paper's ReAct -> CoT-SC on FEVER
    ),
)
GAME = TaskType(
    "game",
    unit="game",
    header="Task",
    prompts="games/",
    scores=(
        Score("success", "success", share=True, said="a game is won (1) or not (0)"),
        Score("reward", "reward", share=False, said="a reward is a share of points, 0 to 1"),
    ),
    scoring="outcome",
    style="commands",
    layout="games",
    benchmark="textworld",
    steps=49,  # alfworld.ipynb's `range(1, 50)`
    own_passages=False,
    fields={"success": _NUMBER, "reward": (*_NUMBER, None), "game": (str,)},
    # The ALFWorld notebook's prompt file: it joins two exemplars of the game's kind (agents.prompts.KIND_KEY); a
    # TextWorld game's nearest kind is `put` (find an object, act on it).
    reference=Reference(
        "prompts/alfworld_3prompts.json",
        "alfworld.ipynb",
        key="{method}_{kind}_1+{method}_{kind}_0",
        methods=("react", "act"),
        sampled=False,
        frame="prompt",  # alfworld.ipynb's `prompt = '<instruction>' + d[...] + d[...] + '<the task follows>'`
        loop_said="alfworld.ipynb's alfworld_run, byte for byte (--loop reference)",
        differences=(
            "games: {games} (the paper's: ALFWorld's 134 unseen games), {openings}; its exemplars are ALFWorld's "
            "household, of each game's kind (put, the nearest, for a game that names none), so this is the paper's "
            "format{not_task}",
            "scoring: success and reward of TextWorld's games",
            "model: {model} (the paper's: PaLM-540B; the notebook: text-davinci-002)",
        ),
    ),
)
SUCCESS = Score("success", "success", share=True, said="an episode is won (1) or not (0)")
# ScienceWorld (Wang et al., 2022): its own score, 0 to 100, is the headline, as SwiftSage reports it; won at 100.
SCIENCEWORLD = TaskType(
    "scienceworld",
    unit="episode",
    header="Task",
    prompts="scienceworld/",
    scores=(
        Score("score", "score", share=False, high=100.0, said="ScienceWorld's score is 0 to 100"),
        SUCCESS,
        Score("reward", "reward", share=False, said="a reward is the score as a share, 0 to 1"),
    ),
    scoring="outcome",
    style="commands",
    layout="scienceworld",
    benchmark="scienceworld",
    steps=200,  # SwiftSage's eval_agent_react.py: `max_steps = args["env_step_limit"] * 2`
    own_passages=False,
    fields={"success": _NUMBER, "reward": (*_NUMBER, None), "score": (*_NUMBER, None), "game": (str,)},
    # SwiftSage's ReAct baseline (its science_world branch): one exemplar per task, keyed by the task's number
    # (`d[str(task_num)]`), after the words its `init_prompt` starts with.
    reference=Reference(
        "baselines/ReAct_baseline/prompt.jsonl",
        "baselines/eval_agent_react.py",
        key="{task}",
        methods=("react",),
        sampled=False,
        frame="init_prompt",
        max_tokens=50,  # its llm_gpt's max_tokens
        loop_said="SwiftSage's eval_agent_react.py with eval_utils.findValidActionNew, byte for byte "
        "(--loop reference)",
        differences=(
            "model: {model}, a completion model sent the text as it is (SwiftSage's: gpt-4 and gpt-3.5-turbo, the "
            "text sent as one user message of a chat)",
            "prompt cut: to the model's own context window and tokenizer, less 60 tokens (SwiftSage's: 4,096 or "
            "8,192 tokens, counted by tiktoken)",
            "valid actions: a tie of words shared goes to the shortest action, then the first alphabetically "
            "(SwiftSage's: the shortest, then Python's set order, which changes with each process)",
        ),
    ),
)
# Programs (HumanEval): a method writes a Python function for each problem, and the problem's hidden tests, run
# apart from rawreact (environments.sandbox), judge it: pass@1 is the share passed, as HumanEval's harness scores.
PROGRAM = TaskType(
    "program",
    unit="problem",
    header="Problem",
    prompts="programs/",
    scores=(Score("success", "pass@1", share=True, said="a program passes its hidden tests (1) or not (0)"),),
    scoring="outcome",
    style="program",
    layout="humaneval",
    benchmark="humaneval",
    steps=1,
    own_passages=False,
    fields={"success": _NUMBER, "program": (dict,)},
    methods=("simple", "reflexion", "lats"),
    won="passed",
    outcomes=("passed", "failed"),
)
TASK_TYPES: dict[str, TaskType] = {t.name: t for t in (QA, FEVER, GAME, SCIENCEWORLD, PROGRAM)}


def task_type(name: str | None) -> TaskType:
    """The task type of that name (a record's `task`; a record without one is a question, as before types)."""
    return TASK_TYPES[name or QA.name]


def of_layout(layout: str) -> TaskType:
    """The task type of a collection's layout: the type that declares it, else a question."""
    return next((t for t in TASK_TYPES.values() if t.layout and t.layout == layout), QA)


def of_records(records) -> TaskType:
    """The task type of a run's records: theirs when they share one, else a question's (mixed or none)."""
    names = {r.get("task") or QA.name for r in records}
    name = names.pop() if len(names) == 1 else None
    return TASK_TYPES.get(name, QA)
