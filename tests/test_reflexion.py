"""Reflexion on the scripted model: what each strategy shows the next trial, when trials stop, the
evaluators' verdicts, the reflection prompt, the records, report, show, export and the settings."""

import json
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rawreact import DataError, load_prompt, read_run
from rawreact.agents.methods import solve
from rawreact.agents.reflexion import (
    AFTER_LAST,
    CUT,
    END_OF_LAST,
    LAST_TRIAL,
    REFLECTIONS,
    cut_to_fit,
    gold_context,
    load_reflect_prompt,
    passes,
    trials,
)
from rawreact.config.settings import Settings
from rawreact.core.errors import PromptError
from rawreact.experiments.variants import Variant, ablation
from rawreact.models.scripted import ScriptedModel
from rawreact.reports.export import export
from rawreact.reports.html import write_page
from rawreact.reports.show import show
from rawreact.reports.trials import trial_rows, trial_stats
from rawreact.runs.run import run_questions
from rawreact.runs.setup import envs_of, prompt_of, solve_options
from rawreact.tasks.hotpotqa import from_rows

Q = "Which prize did the novel by the founder of the Orlo Lantern Festival win?"
GOLD = "Halvard Prize"


class Trials:
    """A script that answers `answers[t]` at trial t (one search, then Finish) and writes reflection k as "lesson k"."""

    def __init__(self, answers: list[str]) -> None:
        self.answers, self.trial, self.reflections = answers, 0, 0

    def __call__(self, prompt: str) -> str:
        if prompt.endswith("Reflection:"):
            self.reflections += 1
            return f" lesson {self.reflections}: search the founder first.\nQuestion: not this"
        if prompt.endswith("Thought 1:"):
            self.trial += 1
            return " I need the founder.\nAction 1: Search[Orlo Lantern Festival]\nObservation 1: made up"
        return f" So the answer is {self.answers[self.trial - 1]}.\nAction 2: Finish[{self.answers[self.trial - 1]}]"


def _solve(demo, script, strategy, n=3, **options):
    model = ScriptedModel(script)
    question = next(q for q in demo.questions if q.question == Q)
    reflexion = {"strategy": strategy, "trials": n, "gold": GOLD} | options
    outcome = solve(Q, demo.env(question), model, load_prompt(), method="react-reflexion", reflexion=reflexion)
    return outcome, model


def _trial_prompts(model) -> list[str]:
    """The first prompt of each trial (the call after `Thought 1:`)."""
    return [h["prompt"] for h in model.history if h["prompt"].endswith("Thought 1:")]


def _memory(prompt: str) -> str:
    """What a trial's prompt holds between the few-shot prompt and its question line."""
    head = prompt[: prompt.rindex(f"Question: {Q}\nThought 1:")]
    return head[len(load_prompt().text) :]


def test_base_shows_the_next_trial_nothing_and_writes_no_reflection(demo):
    outcome, model = _solve(demo, Trials(["Orlo", "Orlo", "Orlo"]), "base")
    assert [t.passed for t in outcome.trials] == [False, False, False]
    prompts = _trial_prompts(model)
    assert (
        len(prompts) == 3
        and prompts[0] == prompts[1] == prompts[2] == load_prompt().text + f"Question: {Q}\nThought 1:"
    )
    assert not any(h["prompt"].endswith("Reflection:") for h in model.history)
    assert all(t.reflection is None for t in outcome.trials) and outcome.model_calls == 6


def test_last_trial_shows_the_last_trajectory_and_calls_for_no_reflection(demo):
    outcome, model = _solve(demo, Trials(["Orlo", "Tessin", "Ford"]), "last_trial")
    prompts = _trial_prompts(model)
    assert _memory(prompts[0]) == ""
    for k in (1, 2):  # each trial after a failure holds the one before it, and only that one
        last = outcome.trials[k - 1].part
        steps = "".join(step.render() for step in last.steps).strip("\n")
        assert _memory(prompts[k]) == f"{LAST_TRIAL}Question: {Q}\n{steps}\n{END_OF_LAST}\n"
    assert "Finish[Tessin]" in prompts[2] and "Finish[Orlo]" not in prompts[2]
    assert not any(h["prompt"].endswith("Reflection:") for h in model.history) and outcome.model_calls == 6


def test_reflexion_shows_every_reflection_so_far_and_the_reflection_sees_the_failed_trial(demo):
    outcome, model = _solve(demo, Trials(["Orlo", "Tessin", "Ford"]), "reflexion")
    prompts = _trial_prompts(model)
    lesson = [f"lesson {k}: search the founder first." for k in (1, 2)]
    assert _memory(prompts[1]) == f"{REFLECTIONS}- {lesson[0]}\n\n"
    assert _memory(prompts[2]) == f"{REFLECTIONS}- {lesson[0]}\n- {lesson[1]}\n\n"
    assert [None if t.reflection is None else t.reflection.text for t in outcome.trials] == [*lesson, None]
    reflecting = [h for h in model.history if h["prompt"].endswith("Reflection:")]
    assert len(reflecting) == 2 and outcome.model_calls == 8  # no reflection after the last trial
    first = reflecting[0]
    shipped = load_reflect_prompt()
    assert first["prompt"].startswith(shipped.instruction + shipped.examples)
    steps = "".join(step.render() for step in outcome.trials[0].part.steps)
    assert first["prompt"].endswith(f"Question: {Q}\n{steps}Reflection:")
    assert first["max_tokens"] == 250 and first["stop"] == ["\n\n", "\nQuestion:"]  # cut at the next question


def test_last_trial_and_reflexion_shows_the_last_trial_and_only_its_reflection(demo):
    outcome, model = _solve(demo, Trials(["Orlo", "Tessin", "Ford"]), "last_trial_and_reflexion")
    prompts = _trial_prompts(model)
    steps = "".join(step.render() for step in outcome.trials[1].part.steps).strip("\n")
    expected = f"{LAST_TRIAL}Question: {Q}\n{steps}\n{END_OF_LAST}{AFTER_LAST}- lesson 2: search the founder first.\n\n"
    assert _memory(prompts[2]) == expected and "lesson 1" not in prompts[2]


@pytest.mark.parametrize("strategy", ["base", "last_trial", "reflexion", "last_trial_and_reflexion"])
def test_a_correct_trial_ends_the_question(demo, strategy):
    outcome, model = _solve(demo, Trials(["Orlo", "halvard prize", "never asked"]), strategy, n=5)
    assert [t.passed for t in outcome.trials] == [False, True]  # normalised exact match, as the reference's EM
    assert outcome.answer == "halvard prize" and outcome.trials[-1].reflection is None
    reflections = 1 if strategy in ("reflexion", "last_trial_and_reflexion") else 0
    assert outcome.model_calls == 4 + reflections == len(model.history)


def test_one_trial_is_plain_react_call_for_call(demo):
    question = next(q for q in demo.questions if q.question == Q)
    plain = ScriptedModel(Trials(["Orlo"]))
    react = solve(Q, demo.env(question), plain, load_prompt(), method="react")
    for strategy in ("base", "last_trial", "reflexion", "last_trial_and_reflexion"):
        outcome, model = _solve(demo, Trials(["Orlo"]), strategy, n=1)
        assert model.history == plain.history and len(outcome.trials) == 1
        assert outcome.trajectory.to_dict() | {"steps": None} == react.trajectory.to_dict() | {"steps": None}
        assert [s.render() for s in outcome.steps] == [s.render() for s in react.steps]


def test_the_evaluators_give_their_documented_verdicts(demo):
    question = next(q for q in demo.questions if q.question == Q)
    model = ScriptedModel(Trials(["Halvard Prize"]))
    searched = solve(Q, demo.env(question), model, load_prompt(), method="react").trajectory
    # em: the gold answer, normalised (case, articles, punctuation); supported: seen in an observation
    assert passes("em", searched, "the halvard prize.") and not passes("em", searched, "Halvard")
    model = ScriptedModel(
        [" I need her.\nAction 1: Search[Mara Dussel]", " So it is the Halvard Prize.\nAction 2: Finish[Halvard Prize]"]
    )
    seen = solve(Q, demo.env(question), model, load_prompt(), method="react").trajectory
    assert passes("supported", seen, "a wrong gold answer") and passes("em", seen, GOLD)
    model = ScriptedModel([" I need her.\nAction 1: Search[Mara Dussel]", " Maybe.\nAction 2: Finish[Booker Prize]"])
    unseen = solve(Q, demo.env(question), model, load_prompt(), method="react").trajectory
    assert not passes("supported", unseen, "Booker Prize") and passes("em", unseen, "Booker Prize")
    model = ScriptedModel([" Finish now.\nAction 1: Finish[]"])
    empty = solve(Q, demo.env(question), model, load_prompt(), method="react").trajectory
    assert not passes("em", empty, "") and not passes("supported", empty, "")


def test_cot_with_the_gold_context_sees_it_and_supported_judges_by_it(demo):
    question = next(q for q in demo.questions if q.question == Q)
    env = demo.env(question)
    context = gold_context([" ".join(env.pages.sentences(t)) for t in question.supporting])
    answers = iter(["Booker Prize", "Halvard Prize"])

    def script(prompt):
        if prompt.endswith("Reflection:"):
            return " I named a place, not a prize."
        return f" The context says so.\nAnswer: {next(answers)}"

    model = ScriptedModel(script)
    prompt = load_prompt(method="cot-context")
    reflexion = {"strategy": "reflexion", "trials": 3, "evaluator": "supported", "gold": "", "context": context}
    outcome = solve(Q, env, model, prompt, method="cot-reflexion", reflexion=reflexion)
    assert [t.passed for t in outcome.trials] == [False, True] and outcome.answer == "Halvard Prize"
    first, reflect, second = (h["prompt"] for h in model.history)
    assert first == prompt.text + context + f"Question: {Q}\nThought:"
    assert context.startswith("Context: The Orlo Lantern Festival") and "Halvard Prize in 1968" in context
    assert reflect.endswith(f"{context}Question: {Q}\nThought: The context says so.\nAnswer: Booker Prize\nReflection:")
    assert (
        second
        == prompt.text + f"{REFLECTIONS}- I named a place, not a prize.\n\n" + context + f"Question: {Q}\nThought:"
    )
    assert outcome.branch == "cot" and outcome.reasoning.preamble.endswith(context)


def test_a_long_trial_has_its_longest_observations_cut_first_and_the_reflection_says_so(demo):
    text = "Thought 1: a\nAction 1: Search[x]\nObservation 1: " + "long " * 50 + "\nObservation 2: short one\n"
    count = lambda t: len(t.split())  # noqa: E731
    kept, cut = cut_to_fit(text, 40, count)
    assert cut == [1] and f"Observation 1: {CUT}" in kept and "Observation 2: short one" in kept
    assert cut_to_fit(text, 1000, count) == (text, [])
    outcome, model = _solve(demo, Trials(["Orlo", "Tessin"]), "reflexion", n=2, scratchpad_tokens=45)
    reflection = outcome.trials[0].reflection
    assert reflection.cut == [1]  # the search's observation was the longest
    reflected = next(h["prompt"] for h in model.history if h["prompt"].endswith("Reflection:"))
    assert f"Observation 1: {CUT}\n" in reflected


def test_the_reference_code_s_layout_works_from_the_user_s_own_files(tmp_path):
    # Stand-ins in the layout of the Reflexion code's prompts.py and fewshots.py (not its text).
    (tmp_path / "prompts.py").write_text(
        'TEMPLATE = """Improve.\nExamples:\n{examples}\n\nPrevious trial:\nQuestion: {question}{scratchpad}\n\n'
        'Reflection:"""\nOTHER = "x"\n'
    )
    (tmp_path / "fewshots.py").write_text('EXAMPLES = """\nPrevious Trial:\nQuestion: q\nReflection: r\n"""\n')
    prompt = load_reflect_prompt(
        str(tmp_path / "fewshots.py"), key="EXAMPLES", instruction=f"{tmp_path / 'prompts.py'}#TEMPLATE"
    )
    assert prompt.template and prompt.source.endswith("fewshots.py#EXAMPLES + " + f"{tmp_path / 'prompts.py'}#TEMPLATE")
    text = prompt.text("Who?", "Thought 1: t\nAction 1: Finish[x]\nObservation 1: Episode finished.\n")
    expected = (
        "Improve.\nExamples:\n\nPrevious Trial:\nQuestion: q\nReflection: r\n\n\nPrevious trial:\nQuestion: Who?"
        "\nThought 1: t\nAction 1: Finish[x]\nObservation 1: Episode finished.\n\nReflection:"
    )
    assert text == expected and text.startswith(prompt.prefix)
    with pytest.raises(PromptError, match=r"no top-level string named 'MISSING'; its strings are: OTHER, TEMPLATE"):
        load_reflect_prompt(instruction=f"{tmp_path / 'prompts.py'}#MISSING")
    with pytest.raises(PromptError, match="--reflect-key"):
        load_reflect_prompt(str(tmp_path / "fewshots.py"))


@pytest.mark.parametrize(
    "values, message",
    [
        ({"trials": 3}, "trials apply to the Reflexion methods"),
        ({"method": "react", "strategy": "base"}, "strategy apply to the Reflexion methods"),
        ({"method": "react-reflexion", "context": "gold"}, "applies to cot-reflexion only"),
        ({"method": "cot-reflexion", "evaluator": "supported"}, "CoT without context reads nothing"),
        ({"method": "cot-reflexion", "grammar": "step"}, "writes none; drop the grammar"),
        ({"method": "react-reflexion", "strategy": "all"}, r"strategy='all' \(--strategy\); use one of base"),
        ({"method": "react-reflexion", "evaluator": "gold"}, "use one of em, supported"),
        ({"method": "react-reflexion", "trials": 0}, r"trials=0 \(--trials\) must be at least 1"),
        ({"method": "cot-reflexion", "repeats": "stop"}, "takes none; drop them"),
    ],
)
def test_settings_that_do_not_go_together_are_refused_before_anything_runs(values, message):
    with pytest.raises(DataError, match=message):
        Settings(**values)


def test_compare_s_reflexion_ablation_runs_the_four_strategies():
    variants = ablation("reflexion", Variant("run", trials=3, method="react-reflexion"))
    assert [(v.name, v.strategy, v.method, v.trials) for v in variants] == [
        ("base", "base", "react-reflexion", 3),
        ("last_trial", "last_trial", "react-reflexion", 3),
        ("reflexion", "reflexion", "react-reflexion", 3),
        ("last_trial_and_reflexion", "last_trial_and_reflexion", "react-reflexion", 3),
    ]
    assert {v.method for v in ablation("reflexion", Variant("run"))} == {"react-reflexion"}
    assert {v.method for v in ablation("reflexion", Variant("run", method="cot-reflexion"))} == {"cot-reflexion"}


def _run(demo, tmp_path, script, strategy="reflexion", n=3, **settings):
    question = next(q for q in demo.questions if q.question == Q)
    out, both = tmp_path / "run.jsonl", settings.pop("both", False)
    options = {"strategy": strategy, "trials": n, "evaluator": "em", "context": "none", "reflect_max_tokens": 250}
    options |= {"reflect_prompt": load_reflect_prompt()} | settings
    results = run_questions(
        [question, replace(question, id="no-gold", answer="")] if both else [question],
        demo.env,
        ScriptedModel(script),
        load_prompt(),
        out=out,
        method="react-reflexion",
        reflexion=options,
    )
    return list(results), out


def test_the_record_keeps_every_trial_its_verdict_scores_cost_and_reflection(demo, tmp_path):
    [result], out = _run(demo, tmp_path, Trials(["Orlo", "Tessin", "Halvard Prize"]))
    _, [record] = read_run(out)
    assert record["reflexion"] == {"strategy": "reflexion", "evaluator": "em", "trials": 3, "context": "none"}
    assert record["prediction"] == "Halvard Prize" and record["em"] == 1.0 and record["steps"] == 2
    trials = record["trials"]
    assert [t["trial"] for t in trials] == [1, 2, 3] and [t["passed"] for t in trials] == [False, False, True]
    assert [t["answer"] for t in trials] == ["Orlo", "Tessin", "Halvard Prize"] and [t["em"] for t in trials] == [
        0,
        0,
        1,
    ]
    assert [t["model_calls"] for t in trials] == [3, 3, 2]  # two steps, and the reflection after a failed trial
    assert record["model_calls"] == 8 == sum(t["model_calls"] for t in trials)
    assert record["tokens"]["completion"] == sum(t["tokens"]["completion"] for t in trials)
    assert [t["reflection"] and t["reflection"]["text"] for t in trials] == [
        "lesson 1: search the founder first.",
        "lesson 2: search the founder first.",
        None,
    ]
    assert "prompt" not in trials[0]["trajectory"] and trials[2]["trajectory"]["preamble"].count("- lesson") == 2
    assert not (tmp_path / "run.jsonl.trials").exists()  # the question finished: nothing is under way
    text = show(record)
    order = [
        text.index(s) for s in ("--- trial 1: failed", "[reflection] lesson 1", "--- trial 2", "--- trial 3: passed")
    ]
    assert order == sorted(order) and "Finish[Halvard Prize]" in text


def test_report_gives_the_score_after_each_trial_and_each_trial_s_cost(demo, tmp_path):
    _, out = _run(demo, tmp_path, Trials(["Orlo", "Halvard Prize", "x"]), n=4)
    _, records = read_run(out)
    other = json.loads(json.dumps(records[0]))
    other["id"], other["trials"] = "b", other["trials"][:1]  # a question that failed its only trial of 4
    stats = trial_stats([records[0], other])
    assert [(s["trial"], s["ran"], s["passed"], s["em"]) for s in stats] == [
        (1, 2, 0, 0.0),
        (2, 1, 1, 0.5),
        (3, 0, 0, 0.5),  # the answer after trial 2 holds after 3 and 4
        (4, 0, 0, 0.5),
    ]
    assert stats[0]["calls"] == 6 and stats[1]["calls"] == 2 and stats[0]["reflections"] == 2
    rows = trial_rows({"r": [records[0], other]})
    assert [r["EM after"] for r in rows] == ["0.000", "0.500", "0.500", "0.500"] and rows[1]["passed"] == "1 (em)"


def test_the_em_evaluator_refuses_a_question_without_a_gold_answer(demo, tmp_path):
    with pytest.raises(DataError, match="question no-gold has no gold answer, which the em evaluator needs"):
        _run(demo, tmp_path, Trials(["Orlo", "Halvard Prize"]), both=True)


def test_export_takes_the_successful_final_trial_without_its_memory_unless_asked(demo, tmp_path):
    _, out = _run(demo, tmp_path, Trials(["Orlo", "Halvard Prize"]))
    plain = export([out], tmp_path / "plain.jsonl")
    assert plain.examples == 2 and plain.questions == 1
    first = json.loads((tmp_path / "plain.jsonl").read_text().splitlines()[0])
    assert first["prompt"] == f"Question: {Q}\nThought 1:" and "lesson" not in first["prompt"]
    export([out], tmp_path / "memory.jsonl", with_memory=True)
    kept = json.loads((tmp_path / "memory.jsonl").read_text().splitlines()[0])
    assert kept["prompt"] == f"{REFLECTIONS}- lesson 1: search the founder first.\n\nQuestion: {Q}\nThought 1:"
    assert re.search(r"Finish\[Halvard Prize\]", (tmp_path / "plain.jsonl").read_text())


def test_trials_resume_after_the_last_kept_one_and_write_its_missing_reflection(demo):
    script = Trials(["Orlo", "Tessin", "Halvard Prize"])
    model = ScriptedModel(script)
    question = next(q for q in demo.questions if q.question == Q)
    kept = []
    made = trials(Q, demo.env(question), model, load_prompt(), trials=1, gold=GOLD, on_trial=kept.append)
    assert len(made) == 1 and made[0].reflection is None and kept == made  # one trial, no reflection yet
    calls = len(model.history)
    more = trials(Q, demo.env(question), model, load_prompt(), trials=3, gold=GOLD, done=made)
    assert [t.n for t in more] == [1, 2, 3] and more[0] is made[0] and more[-1].passed
    assert more[0].reflection.text == "lesson 1: search the founder first."
    assert len(model.history) - calls == 1 + 2 + 1 + 2  # the missing reflection, then trials 2 and 3 only


RAWREACT = [sys.executable, "-m", "rawreact"]


def test_a_run_killed_between_trials_resumes_at_the_next_trial_with_the_earlier_ones_intact(tmp_path):
    script = tmp_path / "script.json"
    steps = [" I need the founder.\nAction 1: Search[Orlo Lantern Festival]", " So it is Orlo.\nAction 2: Finish[Orlo]"]
    script.write_text(
        json.dumps({"questions": {Q: steps}, "reflection": " Search the founder next.", "seconds_per_call": 0.25})
    )
    out = tmp_path / "run.jsonl"
    args = [*RAWREACT, "run", "--model", f"scripted:{script}", "--method", "react-reflexion", "--trials", "3"]
    args += ["--limit", "1", "--out", str(out), "-q"]
    run = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "run.jsonl.trials"
    while not log.exists() or log.read_text().count("\n") < 2:  # trial 1, then trial 1 with its reflection
        assert run.poll() is None, run.stderr.read()
        time.sleep(0.02)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL and not read_run(out)[1]  # the question had not finished
    kept = {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        kept[entry["trial"]] = entry  # a trial's later line adds its reflection
    assert kept[1]["reflection"]["text"] == "Search the founder next."
    resumed = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    manifest, [record] = read_run(out)
    assert [t["trial"] for t in record["trials"]] == [1, 2, 3] and manifest["resumes"] == []  # nothing had finished
    for n, entry in kept.items():  # byte for byte, with each call's timing: nothing was asked again
        assert record["trials"][n - 1]["trajectory"] == entry["trajectory"]
        if entry["reflection"] is not None:
            assert record["trials"][n - 1]["reflection"] == entry["reflection"]
    assert record["trials"][1]["trajectory"]["preamble"].count("- Search the founder next.") == 1
    assert record["trials"][2]["trajectory"]["preamble"].count("- Search the founder next.") == 2
    assert not log.exists()


def test_two_trials_with_a_reflection_on_the_embedded_model(gemma, hotpotqa, tmp_path):
    row = hotpotqa[0]
    collection = from_rows(Path("hotpotqa.json"), "", [(1, row)])
    [question] = collection.questions
    settings = Settings(method="react-reflexion", trials=2, strategy="reflexion")
    out = tmp_path / "run.jsonl"
    [result] = run_questions(
        [question],
        envs_of(settings, collection),
        gemma,
        prompt_of(settings),
        out=out,
        **solve_options(settings, None, None),
    )
    _, [record] = read_run(out)
    assert record["reflexion"] == {"strategy": "reflexion", "evaluator": "em", "trials": 2, "context": "none"}
    first, second = record["trials"]  # Gemma 270M does not answer this question: both trials fail
    assert not first["passed"] and not second["passed"] and record["prediction"] == second["answer"]
    for trial in (first, second):
        assert trial["trajectory"]["steps"] and trial["model_calls"] > 0 and trial["tokens"]["completion"] > 0
        assert trial["em"] == 0 and trial["f1"] is not None and trial["seconds"] > 0
    reflection = first["reflection"]
    assert reflection["text"].strip() and reflection["call"]["completion_tokens"] > 0 and reflection["cut"] == []
    assert second["reflection"] is None  # no trial follows the last one
    sent = result.outcome.trials[1].part.transcript(0)  # what the second trial's first call was sent
    assert f"Reflections:\n- {reflection['text']}\n\nQuestion: {question.question}" in sent
    # the few-shot prefix is kept across trials: the second trial evaluates its memory and question, not the exemplars
    call = second["trajectory"]["steps"][0]["calls"][0]
    exemplars = len(gemma.tokenize(prompt_of(settings).text))
    assert call["evaluated_tokens"] <= call["prompt_tokens"] - exemplars + 1
    assert record["model_calls"] == first["model_calls"] + second["model_calls"]


def test_the_html_report_draws_em_after_each_trial_a_line_per_run_and_shows_every_trial(demo, tmp_path):
    runs = {}
    for name, answers in (("slow", ["Orlo", "Tessin", "Halvard Prize"]), ("fast", ["Halvard Prize"])):
        folder = tmp_path / name
        folder.mkdir()
        runs[name] = _run(demo, folder, Trials(answers))[1]
    page = write_page(runs, tmp_path / "report.html").read_text()
    section = page[page.index('<h2 id="trials">') : page.index("</table>", page.index('<h2 id="trials">'))]
    points = re.findall(r'<circle [^>]*data-series="(\d)" data-x="(\d)" data-y="([0-9.]+)"', section)
    expected = [
        (str(k), str(s["trial"]), f"{s['em']:.4f}")
        for k, records in enumerate(read_run(path)[1] for path in runs.values())
        for s in trial_stats(records)
    ]
    assert points == expected and section.count("<polyline") == 2
    assert [p[2] for p in points if p[0] == "0"] == ["0.0000", "0.0000", "1.0000"]  # slow: solved at trial 3
    assert [p[2] for p in points if p[0] == "1"] == ["1.0000", "1.0000", "1.0000"]  # fast: at trial 1, and holds
    transcript = page[page.index('<h4 class="trial">Trial 1: failed') :]
    order = [transcript.index(s) for s in ("Trial 1: failed", "lesson 1", "Trial 2: failed", "Trial 3: passed")]
    assert order == sorted(order)


def test_reflexion_on_a_fever_file_or_under_the_paper_switch_is_one_clear_error(tmp_path):
    from rawreact.config.paper import reference_options
    from rawreact.runs.setup import collection_of
    from rawreact.tasks.loading import load_collection

    with pytest.raises(DataError, match="Reflexion is not one of them; for the Reflexion code's prompts"):
        reference_options(tmp_path, "qa", "react-reflexion", 10)
    claims = tmp_path / "claims.jsonl"
    claims.write_text(json.dumps({"id": 1, "claim": "Orlo is a village.", "label": "SUPPORTS"}) + "\n")
    fever = load_collection(claims)
    assert fever.task == "fever"
    with pytest.raises(DataError, match="the Reflexion methods answer questions"):
        collection_of(Settings(method="cot-reflexion"), fever)


def test_the_agent_s_exemplars_load_from_a_python_file_of_the_reference_s_layout(tmp_path):
    (tmp_path / "fewshots.py").write_text('SHOTS = """Question: q?\nThought 1: t\nAction 1: Finish[a]"""\n')
    (tmp_path / "instruction.txt").write_text("Solve it.\n")
    prompt = load_prompt(str(tmp_path / "fewshots.py"), key="SHOTS")
    assert prompt.text == "Question: q?\nThought 1: t\nAction 1: Finish[a]\n\n" and prompt.exemplars == 1
    assert prompt.source.endswith("fewshots.py#SHOTS")
    with_instruction = load_prompt(str(tmp_path / "fewshots.py"), key="SHOTS", instruction=tmp_path / "instruction.txt")
    assert with_instruction.text == "Solve it.\n" + prompt.text
    with pytest.raises(PromptError, match="name the string to use with --key"):
        load_prompt(str(tmp_path / "fewshots.py"))
