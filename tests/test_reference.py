"""The reference loop against the tolerant loop: every row of docs/reference.md replayed in both,
the reference environment's own strings, and a property: on completions in the reference's own
well-formed shape, both loops make the same calls and reach the same answer."""

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rawreact import ScriptedModel
from rawreact.agents.methods import solve
from rawreact.core.errors import DataError
from rawreact.core.metrics import exact_match
from rawreact.environments.env import PassageEnv
from rawreact.environments.reference import ReferenceEnv, page_sentences, reference_page
from rawreact.experiments.variants import Variant
from rawreact.runs.run import Result
from rawreact.tasks.collection import Collection, Question

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Solve it.\n"
PAGES = {
    "Orlo": "Orlo is a fishing village. It lies on Lake Veshna. Its festival is held in October.",
    "Lake Veshna": "Lake Veshna is a lake in Calvora. It is fed by the river Tam.",
}
FINISH = " done\nAction {i}: Finish[Orlo]"
ROWS: dict[str, object] = {}


def row(name: str):
    """Register the test of one row of docs/reference.md."""

    def register(test):
        ROWS[name] = test
        return test

    return register


def replay(loop, completions, *, question="Where is Orlo?", pages=PAGES, layout="envs", gold="Orlo", **options):
    """Run `completions` through `loop`: (trajectory, model history, result record)."""
    q = Question("q1", question, gold)
    collection = Collection("t", pages, (q,), layout)
    model = ScriptedModel(completions)
    n_first = options.pop("n_first", None)
    outcome = solve(question, collection.env(q, n_first=n_first, loop=loop), model, PROMPT, loop=loop, **options)
    return outcome.trajectory, model.history, Result(q, outcome).to_dict()


def both(tolerant, reference, **options):
    return replay("tolerant", tolerant, **options), replay("reference", reference, **options)


def test_every_row_of_the_table_has_its_test():
    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    ids = [i for i in re.findall(r"^\| ([a-z][a-z-]*) \|", text, re.MULTILINE) if i != "id"]  # not a header
    assert ids and len(ids) == len(set(ids))
    assert set(ids) == set(ROWS)


def test_both_loops_send_the_question_as_given():
    (_, tol, _), (_, ref, _) = both([FINISH.format(i=1)], [FINISH.format(i=1)], question="Where is  Orlo? ")
    assert tol[0]["prompt"] == ref[0]["prompt"] == PROMPT + "Question: Where is  Orlo? \nThought 1:"
    assert tol[0]["max_tokens"] == ref[0]["max_tokens"] == 100


@row("call-stop")
def test_call_stop():
    steps = [" I look.\nAction 1: Search[Orlo]\nObservation 2: made up\nThought 2: more", FINISH.format(i=2)]
    (tol, th, _), (ref, rh, _) = both(steps, steps)
    assert th[0]["stop"] == ["\nObservation 1:", "]\n"] and rh[0]["stop"] == ["\nObservation 1:"]
    assert tol.steps[0].calls[0].text == " I look.\nAction 1: Search[Orlo"  # nothing after the action line
    assert ref.steps[0].calls[0].text == steps[0]  # the notebook's stop: its wrong step number runs on
    assert tol.steps[0].action_text == "Search[Orlo]" and tol.steps[0].error is None
    (act, ah, _) = replay("tolerant", [" Search[Orlo]\nObservation 1: x", " Finish[Orlo]"], method="act")
    assert ah[0]["stop"] == ["\nObservation 1:", "]\n"] and act.steps[0].action_text == "Search[Orlo]"


@row("sentence-join")
def test_sentence_join():
    carried = {"Orlo": ["Orlo is a village.", " It lies on a lake.", " Its festival is in May."]}
    bare = {"Orlo": ["Orlo is a village.", "It lies on a lake.", "Its festival is in May."]}
    search = [" t\nAction 1: Search[Orlo]", FINISH.format(i=2)]
    for pages in (carried, bare):
        (tol, _, _), (ref, _, _) = both(search, search, pages=pages, n_first=5)
        assert tol.steps[0].observation == "Orlo is a village. It lies on a lake. Its festival is in May."
        # one page text, "Orlo is a village. It lies on a lake. Its festival is in May.", split on ". "
        assert ref.steps[0].observation == "Orlo is a village. It lies on a lake. Its festival is in May.."
    glued = {"Orlo": ["Orlo is a village.", "It lies on a lake."]}
    (ref, _, _) = replay("reference", search, pages=glued, n_first=5)
    assert ref.steps[0].observation == "Orlo is a village. It lies on a lake.."  # joined by one space


def _official_f1(prediction: str, gold: str) -> float:
    """The official HotpotQA script's F1 (hotpot_evaluate_v1.py), stated again: no rule for a non-answer."""
    from collections import Counter

    from rawreact.core.metrics import normalize_answer

    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    return 2 * (same / len(pred)) * (same / len(ref)) / (same / len(pred) + same / len(ref))


@row("symbol-answer")
def test_symbol_answer():
    finish = [" t\nAction 1: Finish[\u2014]"]
    (tol, _, tol_record), (ref, _, ref_record) = both(finish, finish, gold="Mary \u2014 Queen")
    assert tol.answer == ref.answer == "\u2014"
    assert tol_record["em"] == tol_record["f1"] == ref_record["em"] == ref_record["f1"] == 0.0
    assert _official_f1("\u2014", "Mary \u2014 Queen") == 0.5  # what the official script would give it


@row("thought-echo")
def test_thought_echo():
    steps = [" I look\n  for Orlo.\nAction 1: Search[Orlo]", FINISH.format(i=2)]
    (_, tol, _), (_, ref, _) = both(steps, steps)
    assert tol[1]["prompt"].endswith("Thought 1: I look for Orlo.\nAction 1: Search[Orlo]\nObservation 1: "
                                     "Orlo is a fishing village. It lies on Lake Veshna.\nThought 2:")  # fmt: skip
    assert ref[1]["prompt"].endswith("Thought 1: I look\n  for Orlo.\nAction 1: Search[Orlo]\nObservation 1: "
                                     "Orlo is a fishing village. It lies on Lake Veshna. Its festival is held in "
                                     "October..\nThought 2:")  # fmt: skip


@row("action-echo")
def test_action_echo():
    steps = [" t\nAction 1: search[ orlo ]", FINISH.format(i=2)]
    (tol, _, _), (ref, _, _) = both(steps, steps)
    assert tol.steps[0].action_text == "Search[orlo]" and "Action 1: Search[orlo]\n" in tol.transcript()
    assert ref.steps[0].action_text == "search[ orlo ]" and "Action 1: search[ orlo ]\n" in ref.transcript()
    assert tol.search_hits == ref.search_hits == 1  # both open the page


@pytest.mark.parametrize(
    "first",
    [
        " t\nAction 1:Search[Orlo]",
        " t\nAction 2: Search[Orlo]",
        " t\nSearch[Orlo]",
        " t\nAction 1: Search[Orlo]\nAction 1: Lookup[lake]",
    ],
    ids=["no-space", "step-number", "bare-line", "two-actions"],
)  # fmt: skip
@row("fallback-trigger")
def test_fallback_trigger(first):
    (tol, th, _), (ref, rh, _) = both([first, FINISH.format(i=2)], [first, " Search[Orlo]", FINISH.format(i=2)])
    assert [len(s.calls) for s in tol.steps] == [1, 1] and not tol.steps[0].fallback
    assert [len(s.calls) for s in ref.steps] == [2, 1] and ref.steps[0].fallback
    assert rh[1] | {"grammar": None} == {
        "prompt": PROMPT + "Question: Where is Orlo?\nThought 1: t\nAction 1:",
        "stop": ["\n"],
        "max_tokens": 100,
        "grammar": None,
    }
    assert tol.steps[0].observation == ref.steps[0].observation.removesuffix(" Its festival is held in October..")
    assert th[1]["prompt"].count("Thought") == rh[2]["prompt"].count("Thought")


@row("fallback-thought")
def test_fallback_thought():
    (tol, th, _), (ref, rh, _) = both(
        ["  Thought 1: I  look\nmore", " Search[Orlo]", FINISH.format(i=2)],
        ["  Thought 1: I  look\nmore", " Search[Orlo]", FINISH.format(i=2)],
    )
    assert th[1]["prompt"].endswith("Question: Where is Orlo?\nThought 1: I look\nAction 1:")
    assert rh[1]["prompt"].endswith("Question: Where is Orlo?\nThought 1: Thought 1: I  look\nAction 1:")
    assert tol.steps[0].fallback and ref.steps[0].fallback


@row("verb-case")
def test_verb_case():
    steps = [" t\nAction 1: SEARCH[Orlo]", FINISH.format(i=2)]
    (tol, _, _), (ref, _, _) = both(steps, steps)
    assert tol.steps[0].observation.startswith("Orlo is a fishing village.")
    assert ref.steps[0].observation == "Invalid action: sEARCH[Orlo]" and ref.steps[0].error == "invalid"


@row("trailing-text")
def test_trailing_text():
    steps = [" t\nAction 1: Search[Orlo] to see", FINISH.format(i=2)]
    (tol, _, _), (ref, _, _) = both(steps, steps)
    assert tol.searches == tol.search_hits == 1
    assert ref.steps[0].observation == "Invalid action: search[Orlo] to see" and ref.searches == 0


@row("unclosed-bracket")
def test_unclosed_bracket():
    steps = [" t\nAction 1: Search[Orlo", FINISH.format(i=2)]
    (tol, _, _), (ref, _, _) = both(steps, steps)
    assert tol.search_hits == 1
    assert ref.steps[0].observation == "Invalid action: search[Orlo"


@row("quotes")
def test_quotes():
    steps = [' t\nAction 1: Search["Orlo"]', FINISH.format(i=2)]
    (tol, _, _), (ref, _, _) = both(steps, steps)
    assert tol.search_hits == 1
    assert ref.steps[0].observation.startswith("Could not find \"Orlo\". Similar: ['Orlo', ")
    assert ref.search_hits == 0 and ref.searches == 1


@row("lines-after-action")
def test_lines_after_action():
    steps = [" t\nAction 1: Search[Orlo]\nThought 2: more", FINISH.format(i=2)]
    (tol, _, _), (ref, rh, _) = both(steps, steps)
    assert tol.search_hits == 1 and tol.steps[0].action_text == "Search[Orlo]"
    assert ref.steps[0].action_text == "Search[Orlo]\nThought 2: more"
    assert ref.steps[0].observation == "Invalid action: search[Orlo]\nThought 2: more"
    assert rh[1]["prompt"].endswith("Observation 1: Invalid action: search[Orlo]\nThought 2: more\nThought 2:")


@row("invalid-observation")
def test_invalid_observation():
    steps = [" t\nAction 1: Go to  Orlo", FINISH.format(i=2)]
    (tol, _, _), (ref, _, _) = both(steps, steps)
    assert tol.steps[0].observation == "Invalid action: Go to Orlo" and tol.steps[0].error == "no action"
    assert ref.steps[0].observation == "Invalid action: go to  Orlo" and ref.steps[0].error == "invalid"


@row("empty-action")
def test_empty_action():
    steps = [" t", "", FINISH.format(i=2)]
    (tol, _, _), (ref, _, _) = both(steps, steps)
    assert tol.steps[0].observation == "Invalid action:"
    assert ref.steps[0].observation == "Invalid action: " and ref.steps[0].action_text == ""
    assert tol.answer == ref.answer == "Orlo"  # the episode goes on in both


@row("truncated")
def test_truncated():
    cut = " t\nAction 1: Search[Orlo Lantern Festival]"
    # The tolerant loop continues the cut line by one more call from where it stopped, to the line's end; cut
    # again, the line is not carried out.
    tolerant = [cut, " Festival]\nObservation 1: made up", " t\nAction 2: Search[a b c d e f g h]", " c d e f g h",
                " t\nAction 3: Finish[Orlo]"]  # fmt: skip
    (tol, th, _), (ref, _, _) = both(tolerant, [cut, " t\nAction 2: Finish[Orlo]"], max_tokens=5)
    assert tol.steps[0].calls[0].finish_reason == ref.steps[0].finish_reason == "length"
    assert th[1]["prompt"] == th[0]["prompt"] + " t\nAction 1: Search[Orlo Lantern" and th[1]["stop"] == ["\n"]
    assert tol.steps[0].action_text == "Search[Orlo Lantern Festival]" and tol.steps[0].error is None
    assert len(tol.steps[0].calls) == 2 and not tol.steps[0].fallback
    assert tol.steps[1].observation == "Invalid action: Search[a b c d e f g (cut off at the token limit)"
    assert tol.steps[1].error == "truncated" and tol.answer == "Orlo"
    assert ref.steps[0].observation == "Invalid action: search[Orlo Lantern"


HOTPOT_PAGE = {"Orlo": ["Orlo is a village.", " It lies by Lake No. 2.", " Its festival is in October."]}


@row("page-sentences")
def test_page_sentences():
    steps = [" t\nAction 1: Search[Orlo]", FINISH.format(i=2)]
    (tol, _, _), (ref, _, _) = both(steps, steps, pages=HOTPOT_PAGE, layout="hotpotqa", n_first=5)
    assert tol.steps[0].observation == "Orlo is a village. It lies by Lake No. 2. Its festival is in October."
    assert ref.steps[0].observation == "Orlo is a village. It lies by Lake No. 2. Its festival is in October.."
    (tol, _, _), (ref, _, _) = both(steps, steps, pages=HOTPOT_PAGE, layout="hotpotqa", n_first=2)
    assert tol.steps[0].observation == "Orlo is a village. It lies by Lake No. 2."
    assert ref.steps[0].observation == "Orlo is a village. It lies by Lake No."


@row("lookup-sentences")
def test_lookup_sentences():
    steps = [" t\nAction 1: Search[Orlo]", " t\nAction 2: Lookup[lake]", FINISH.format(i=3)]
    (tol, _, _), (ref, _, _) = both(steps, steps, pages=HOTPOT_PAGE, layout="hotpotqa")
    assert tol.steps[1].observation == "(Result 1 / 1) It lies by Lake No. 2."
    assert ref.steps[1].observation == "(Result 1 / 1) It lies by Lake No."


@row("sentences-per-search")
def test_sentences_per_search():
    pages = {"Orlo": "".join(f"Sentence {k} is here. " for k in range(1, 8))}
    steps = [" t\nAction 1: Search[Orlo]", FINISH.format(i=2)]
    (tol, _, tol_record), (ref, _, _) = both(steps, steps, pages=pages)
    assert tol.steps[0].observation == "Sentence 1 is here. Sentence 2 is here."
    assert ref.steps[0].observation == " ".join(f"Sentence {k} is here." for k in range(1, 6))
    assert Variant("a").sentences == 2 and Variant("b", loop="reference").sentences == 5
    assert Variant("c", loop="reference", n_first=3).sentences == 3


@row("observation-whitespace")
def test_observation_whitespace():
    steps = [" t\nAction 1: Search[Orlo]", FINISH.format(i=2)]
    pages = {"Orlo": "Orlo  is a village. It has\ta lake."}
    (tol, _, _), (ref, _, _) = both(steps, steps, pages=pages)
    assert tol.steps[0].observation == "Orlo is a village. It has a lake."
    assert ref.steps[0].observation == "Orlo  is a village. It has\ta lake.."


@row("escaped-line-breaks")
def test_escaped_line_breaks():
    steps = [" t\nAction 1: Search[Orlo]", " t\nAction 2: Lookup[lake]", FINISH.format(i=3)]
    pages = {"Orlo": "Orlo is a village.\\nIt has a lake."}
    (tol, _, _), (ref, _, _) = both(steps, steps, pages=pages)
    assert "\\n" in tol.steps[0].observation
    # clean_str makes the escape a line break: two paragraphs, each piece given its period
    assert ref.steps[0].observation == "Orlo is a village.. It has a lake.."
    assert ref.steps[1].observation == "(Result 1 / 1) It has a lake.."


@pytest.mark.parametrize(
    "text, page",
    [
        ("A tab\\there and more.", "A tab\there and more.\n"),
        ("Quotes \\u0022x\\u0022 are unescaped.", 'Quotes "x" are unescaped.\n'),
        ("Caf\u00e9 au lait is \\u00e9 here.", "Caf\u00e9 au lait is \\u00e9 here.\n"),  # the reference raises
        ("Kept in C:\\Users folder.", "Kept in C:\\Users folder.\n"),  # the reference raises
        ("Ends in a lone backslash \\", "Ends in a lone backslash \\\n"),  # the reference raises
        ("Two words\nand then three words", "and then three words\n"),  # paragraphs of two words or fewer go
        ("Caf\u00e9 and \u65e5\u672c are kept.", "Caf\u00e9 and \u65e5\u672c are kept.\n"),
    ],
)
def test_page_text_is_unescaped_as_the_reference_does_or_kept_where_it_raises(text, page):
    assert reference_page(text) == page


@row("short-page")
def test_short_page():
    steps = [" t\nAction 1: Search[Orlo]", FINISH.format(i=2)]
    (tol, _, _), (ref, rh, _) = both(steps, steps, pages={"Orlo": "Fishing village"})
    assert tol.steps[0].observation == "Fishing village"
    assert ref.steps[0].observation == "" and rh[1]["prompt"].endswith("Observation 1: \nThought 2:")


@row("lookup-exhausted")
def test_lookup_exhausted():
    steps = [" t\nAction 1: Search[Orlo]", " t\nAction 2: Lookup[festival]", " t\nAction 3: Lookup[festival]"]
    steps.append(FINISH.format(i=4))
    (tol, th, _), (ref, rh, _) = both(steps, steps)
    assert tol.steps[1].observation == "(Result 1 / 1) Its festival is held in October."
    assert ref.steps[1].observation == "(Result 1 / 1) Its festival is held in October.."  # the page's end
    assert tol.steps[2].observation == "No more results."
    assert ref.steps[2].observation == "No more results.\n"
    assert th[3]["prompt"].endswith("Observation 3: No more results.\nThought 4:")
    assert rh[3]["prompt"].endswith("Observation 3: No more results.\n\nThought 4:")


@row("finish-answer")
def test_finish_answer():
    (tol, _, tr), (ref, _, rr) = both([' t\nAction 1: Finish["Orlo"]'], [' t\nAction 1: Finish["Orlo"]'])
    assert (tol.answer, ref.answer) == ("Orlo", '"Orlo"')
    assert tr["em"] == rr["em"] == 1.0 and tr["prediction"] == "Orlo" and rr["prediction"] == '"Orlo"'
    steps = [" t\nAction 1: Finish[Orlo] is it", FINISH.format(i=2)]
    (tol, _, _), (ref, _, _) = both(steps, steps)
    assert len(tol.steps) == 1 and tol.answer == "Orlo"
    assert ref.steps[0].observation == "Invalid action: finish[Orlo] is it" and len(ref.steps) == 2


@row("finish-observation")
def test_finish_observation():
    (tol, _, _), (ref, _, _) = both([FINISH.format(i=1)], [FINISH.format(i=1)])
    assert tol.steps[0].observation == "Episode finished."
    assert ref.steps[0].observation == "Episode finished, reward = 1\n"
    (_, _, _), (wrong, _, _) = both([FINISH.format(i=1)], [FINISH.format(i=1)], gold="Tessin Ford")
    assert wrong.steps[0].observation == "Episode finished, reward = 0\n"
    env = ReferenceEnv(PAGES)  # no gold answer: the bare environment's reward
    assert env.step("finish[Orlo]") == ("Episode finished, reward = 0\n", True)


@row("closing-step")
def test_closing_step():
    (tol, th, tr), (ref, rh, rr) = both([" t\nAction 1: Think[hm]"], [" t\nAction 1: Think[hm]"], max_steps=1)
    assert tol.ended == ref.ended == "max_steps" and tol.answer == ref.answer == ""
    assert len(tol.steps) == 1 and tr["steps"] == 1
    closing = ref.steps[1]
    assert (closing.i, closing.action_text, closing.observation, closing.calls) == (
        2, "finish[]", "Episode finished, reward = 0\n", []
    )  # fmt: skip
    assert rr["steps"] == 1 and rr["model_calls"] == 1 and len(th) == len(rh) == 1  # the steps the model took
    assert "finish[]" not in ref.transcript()  # logged, never shown to the model


@row("counts")
def test_counts():
    steps = [" t\nAction 1: SEARCH[Orlo]", " t", " Search[Orlo]", FINISH.format(i=3)]
    (_, _, tr), (_, _, rr) = both(steps, steps)
    assert (tr["fallback_calls"], tr["invalid_actions"]) == (1, 0)
    assert (rr["fallback_calls"], rr["invalid_actions"]) == (1, 1)
    assert tr["loop"] == "tolerant" and rr["loop"] == "reference"


@row("grammar-and-act")
def test_grammar_and_act():
    with pytest.raises(DataError, match="the reference loop sends no grammar"):
        Variant("g", loop="reference", grammar="step")
    with pytest.raises(DataError, match="method cot takes no action"):
        Variant("c", loop="reference", method="cot")
    # Act runs in the reference environment: one call after `Action i:`, its stripped text the action.
    steps = [" Search[Orlo]", " Lookup[lake]\nmore", " Finish[Orlo]"]
    (tol, th, tr), (ref, rh, rr) = both(steps, steps, method="act")
    assert [h["prompt"][-9:] for h in rh] == ["Action 1:", "Action 2:", "Action 3:"]
    assert [h["stop"] for h in rh] == [["\nObservation 1:"], ["\nObservation 2:"], ["\nObservation 3:"]]
    assert ref.steps[0].thought is None and ref.steps[0].observation == (
        "Orlo is a fishing village. It lies on Lake Veshna. Its festival is held in October.."
    )
    assert tol.steps[1].action_text == "Lookup[lake]" and ref.steps[1].error == "invalid"  # lines after the action
    assert ref.steps[1].observation == "Invalid action: lookup[lake]\nmore"
    assert rh[1]["prompt"].endswith("Action 1: Search[Orlo]\nObservation 1: Orlo is a fishing village. It lies on "
                                    "Lake Veshna. Its festival is held in October..\nAction 2:")  # fmt: skip
    assert ref.answer == tol.answer == "Orlo" and rr["loop"] == "reference" and rr["fallback_calls"] == 0
    with pytest.raises(ValueError, match="drop the grammar"):
        replay("reference", [FINISH.format(i=1)], grammar="step")
    tol, history, _ = replay("tolerant", [FINISH.format(i=1)], grammar="step")
    assert history[0]["grammar"] is not None and tol.answer == "Orlo"


def test_the_reference_environment_reads_exactly_its_four_verbs():
    env = ReferenceEnv(PAGES, n_first=1)
    assert ReferenceEnv.read(" search[Orlo] ") is not None
    assert [ReferenceEnv.read(t) for t in ("Search[Orlo]", "search Orlo", "search[Orlo", "look[x]")] == [None] * 4
    assert env.step("lookup[lake]") == ("No more results.\n", False)  # no page yet
    assert env.step("search[Orlo]") == ("Orlo is a fishing village.", False)
    assert env.step("search[Nowhere]")[0].startswith("Could not find Nowhere. Similar: ['")
    assert env.step("lookup[lake]") == ("(Result 1 / 1) It lies on Lake Veshna.", False)  # the page stayed open
    assert env.step("think[x]") == ("Nice thought.", False)
    assert env.step("finish[Orlo]") == ("Episode finished, reward = 0\n", True)
    assert env.step("search[Orlo]") == ("Episode finished, reward = 0\n", True)  # finished: nothing changes
    assert env.steps == 6 and env.answer == "Orlo"


def test_page_sentences_are_the_references_pieces():
    assert page_sentences("A b. C d.\n\n  E f. ") == ["A b.", "C d..", "E f.."]
    assert page_sentences("") == []


def test_reference_runs_on_a_hotpotqa_collection_from_the_command_line(tmp_path, rows):
    import json
    import subprocess
    import sys

    data = tmp_path / "rows.json"
    data.write_text(json.dumps(rows[:1]), encoding="utf-8")
    question = rows[0]["question"]
    script = tmp_path / "script.json"
    title = rows[0]["context"][0][0]
    script.write_text(json.dumps({"questions": {question: [f" t\nAction 1: Search[{title}]", FINISH.format(i=2)]}}))
    out = tmp_path / "run.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "rawreact", "run", data, "--model", f"scripted:{script}", "--loop", "reference",
         "--out", out],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "reference loop (5 sentences per search)" in done.stdout.splitlines()[0]
    record = json.loads(out.read_text().splitlines()[0])
    manifest = json.loads(Path(f"{out}.manifest.json").read_text())
    assert manifest["config"]["loop"] == "reference" and manifest["config"]["n_first"] == 5
    page = "".join(rows[0]["context"][0][1])
    expected = " ".join(page_sentences(page.strip())[:5])
    assert record["trajectory"]["steps"][0]["observation"] == expected
    assert record["loop"] == "reference" and record["fallback_calls"] == 0


# The property: pages whose sentences read the same in both environments, and episodes in the
# reference's own well-formed shape, which neither runs out of lookups nor ends at the last sentence.
WORDS = ["alpha", "bravo", "delta", "kilo", "lima", "oscar", "romeo", "sierra", "tango", "victor"]
TITLES = ["Alpha Page", "Bravo Page", "Delta Page"]


def _page(words: list[str]) -> list[str]:
    sentences = [f"{' '.join(words[k : k + 2]).capitalize()} here." for k in range(0, len(words), 2)]
    return sentences + ["Zzz end."]  # the reference ends its last sentence with "..": never shown or looked up


@st.composite
def episodes(draw):
    pages = {t: _page(draw(st.lists(st.sampled_from(WORDS), min_size=10, max_size=16))) for t in TITLES}
    text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
    steps, open_page, keyword, seen = [], None, None, 0
    for i in range(1, draw(st.integers(1, 6)) + 1):
        kinds = ["search", "miss", "think"] + (["lookup"] if open_page else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "lookup":
            candidates = [w for w in WORDS if any(w in s.lower() for s in pages[open_page][:-1])]
            word = draw(st.sampled_from(candidates))
            found = sum(word in s.lower() for s in pages[open_page][:-1])
            seen = seen + 1 if word == keyword else 1
            if seen > found:  # the two environments word "no more results" differently
                kind = "think"
            else:
                keyword, action = word, f"Lookup[{word}]"
        if kind == "search":
            open_page, keyword = draw(st.sampled_from(TITLES)), None
            action = f"Search[{open_page}]"
        elif kind == "miss":
            action = f"Search[{draw(text)} missing]"
        elif kind == "think":
            action = f"Think[{draw(text)}]"
        steps.append(f" {draw(text).capitalize()}.\nAction {i}: {action}")
    if draw(st.booleans()):
        steps.append(f" {draw(text)}\nAction {len(steps) + 1}: Finish[{draw(text)}]")
    return pages, steps


@given(episodes(), st.sampled_from(["envs", "hotpotqa"]))
def test_well_formed_episodes_make_the_same_calls_in_both_loops(episode, layout):
    pages, steps = episode
    if layout == "hotpotqa":  # HotpotQA sentences carry their own leading spaces
        pages = {t: [s if k == 0 else " " + s for k, s in enumerate(p)] for t, p in pages.items()}
    (tol, th, tr), (ref, rh, rr) = both(steps, steps, pages=pages, layout=layout, n_first=5, max_steps=len(steps))
    assert [(t["prompt"], t["max_tokens"]) for t in th] == [(r["prompt"], r["max_tokens"]) for r in rh]
    assert all(t["stop"] == [*r["stop"], "]\n"] for t, r in zip(th, rh, strict=True))  # the call-stop row
    assert (tol.answer, tol.ended, tr["em"], tr["f1"]) == (ref.answer, ref.ended, rr["em"], rr["f1"])
    assert [s.render() for s in tol.steps if s.action.name != "finish"] == [
        s.render() for s in ref.steps if s.calls and s.action.name != "finish"
    ]
    assert tr["fallback_calls"] == rr["fallback_calls"] == 0
    assert tr["invalid_actions"] == rr["invalid_actions"] == 0
    assert exact_match(ref.answer, "x") == exact_match(tol.answer, "x")


def test_the_loops_ablation_compares_both_loops_and_resumes(rows, tmp_path):
    import json
    import subprocess
    import sys

    from test_runs import _data, _oracle

    from rawreact.experiments.variants import ablation
    from rawreact.runs.records import read_run

    base = Variant("base", n_first=5)
    assert [(v.name, v.loop, v.sentences) for v in ablation("loops", base)] == [
        ("tolerant", "tolerant", 5),
        ("reference", "reference", 5),
    ]
    methods = {v.name: v.loop for v in ablation("methods", Variant("base", loop="reference"))}
    assert methods == {"react": "reference", "act": "reference", "standard": "tolerant", "cot": "tolerant",
                       "cot-sc": "tolerant", "react-cot-sc": "reference", "cot-sc-react": "reference"}  # fmt: skip
    data, model = _data(rows, tmp_path, 6), _oracle(rows, tmp_path / "o.json", wrong_every=3)
    command = [sys.executable, "-m", "rawreact", "compare", data, "--ablation", "loops", "--base", f"model={model}",
               "--out", tmp_path / "cmp", "-q"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    header, *lines = done.stdout.splitlines()
    assert header.split()[:4] == ["variant", "method", "loop", "n"]
    assert [line.split()[:4] for line in lines[:2]] == [["tolerant", "react", "tolerant", "6"],
                                                        ["reference", "react", "reference", "6"]]  # fmt: skip
    for loop, sentences in (("tolerant", 2), ("reference", 5)):
        manifest, records = read_run(tmp_path / "cmp" / f"{loop}.jsonl")
        assert (manifest["config"]["loop"], manifest["config"]["n_first"]) == (loop, sentences)
        assert [r["em"] for r in records] == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
        traj = records[0]["trajectory"]
        assert traj["loop"] == loop and all("fallback" in s for s in traj["steps"])
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)  # finished: resumes, asks nothing
    assert again.returncode == 0 and again.stdout == done.stdout
    config = json.loads((tmp_path / "cmp" / "tolerant.jsonl.manifest.json").read_text())["config"]
    assert config["loop"] == "tolerant"


def test_a_reference_trajectory_reads_back_from_its_run_file(tmp_path):
    from rawreact.agents.record import Trajectory
    from rawreact.runs.records import read_run
    from rawreact.runs.runfile import RunFile

    steps = [" t\nAction 1:Search[Orlo]", " Search[Orlo]", " t\nAction 2: Think[x]"]
    traj, _, record = replay("reference", steps, max_steps=2)
    sink = RunFile(tmp_path / "r.jsonl", {"loop": "reference"})
    sink.append(record)
    sink.close()
    [back] = read_run(tmp_path / "r.jsonl")[1]
    again = Trajectory.from_dict(back["trajectory"])
    assert again.loop == "reference" and [s.fallback for s in again.steps] == [True, False, False]
    assert again.steps[-1].calls == [] and again.steps[-1].finish_reason == ""
    assert again.transcript() == traj.transcript() and again.to_dict() == traj.to_dict()
    old = traj.to_dict()  # a trajectory written before loops and fallbacks were recorded
    del old["loop"]
    for step in old["steps"]:
        del step["fallback"]
    assert Trajectory.from_dict(old).loop == "tolerant"
    assert [s.fallback for s in Trajectory.from_dict(old).steps] == [True, False, False]


# Reflexion against the Reflexion code: its rows of docs/reference.md.

GOLD = "Orlo"


def _files(tmp_path: Path, agent: str) -> tuple:
    """Stand-ins in the layout of the Reflexion code's fewshots.py and prompts.py (not its text): its
    reflection template, and the prompts of rawreact's own files for comparison."""
    from rawreact.agents.reflexion import load_reflect_prompt

    (tmp_path / "prompts.py").write_text(
        'TEMPLATE = """Improve.\n{examples}\nPrevious trial:\nQuestion: {question}{scratchpad}\n\nReflection:"""\n'
    )
    (tmp_path / "fewshots.py").write_text('EXAMPLES = """\nQuestion: q\nReflection: r\n"""\n')
    code = load_reflect_prompt(str(tmp_path / "fewshots.py"), key="EXAMPLES",
                               instruction=f"{tmp_path / 'prompts.py'}#TEMPLATE", agent=agent)  # fmt: skip
    return code, load_reflect_prompt(agent=agent)


def _trials(agent: str, reflect_prompt, reply: str, *, as_code: bool = False, answers=("Tam", "Orlo")):
    """Two trials of `agent` on a wrong, then a right answer, with `reply` as every reflection's text."""
    from rawreact.agents.reflexion import trials

    answered = iter(answers)

    def script(prompt: str) -> str:
        if prompt.endswith("Reflection:"):
            return reply
        if prompt.endswith("Action:"):  # the Reflexion code's second CoT call
            return f" Finish[{next(answered)}]"
        if agent == "cot" and as_code:
            return " It lies on the lake, so I finish.\nAnother line."
        if agent == "cot":
            return f" It lies on the lake. So the answer is {next(answered)}."
        return f" Done.\nAction 1: Finish[{next(answered)}]"

    model = ScriptedModel(script)
    env = PassageEnv(PAGES)  # Reflexion's trials run in the tolerant loop
    made = trials("Where is Orlo?", env, model, PROMPT, agent=agent, gold=GOLD, reflect_prompt=reflect_prompt,
                  as_reflexion_code=as_code, trials=2)  # fmt: skip
    return made, model.history


@row("cot-trial-calls")
def test_cot_trial_calls(tmp_path):
    code, own = _files(tmp_path, "cot")
    made, calls = _trials("cot", own, " r.")
    first = [c for c in calls if c["prompt"].endswith("Thought:")][0]
    assert first["stop"] == ["\nQuestion:", "\n\n"] and first["max_tokens"] == 100
    assert [t.answer for t in made] == ["Tam", "Orlo"] and len(made[0].calls) == 2  # the trial, its reflection
    made, calls = _trials("cot", code, " r.", as_code=True)
    thought, action = [c for c in calls if not c["prompt"].endswith("Reflection:")][:2]
    assert thought["prompt"].endswith("Question: Where is Orlo?\nThought:") and thought["stop"] == ["\n"]
    assert action["prompt"] == thought["prompt"] + " It lies on the lake, so I finish.\nAction:"
    assert action["stop"] == ["\n"] and thought["max_tokens"] == action["max_tokens"] == 250
    assert [t.answer for t in made] == ["Tam", "Orlo"] and len(made[0].calls) == 3  # two calls, its reflection
    again = Result(Question("q", "Where is Orlo?", GOLD), solve_trials(made)).to_dict()
    assert again["model_calls"] == 5 and len(again["trials"][0]["reasoning"]["samples"][0]["calls"]) == 2


def solve_trials(made):
    from rawreact.agents.methods import Outcome

    return Outcome("cot-reflexion", "cot", reasoning=made[-1].part, trials=made)


@row("cot-reflection-stop")
def test_cot_reflection_stop(tmp_path):
    code, own = _files(tmp_path, "cot")
    made, calls = _trials("cot", own, " I guessed.\nNext time, read it.\n\nQuestion: x")
    reflection = next(c for c in calls if c["prompt"].endswith("Reflection:"))
    assert reflection["stop"] == ["\n\n", "\nQuestion:"] and made[0].reflection.text == "I guessed. Next time, read it."
    made, calls = _trials("cot", code, " I guessed.\nNext time, read it.", as_code=True)
    reflection = next(c for c in calls if c["prompt"].endswith("Reflection:"))
    assert reflection["stop"] == ["\n"] and reflection["max_tokens"] == 250 and made[0].reflection.text == "I guessed."


@row("reflection-line-breaks")
def test_reflection_line_breaks(tmp_path):
    code, own = _files(tmp_path, "react")
    made, calls = _trials("react", own, " I guessed.\nNext time, search.")
    assert made[0].reflection.text == "I guessed. Next time, search."
    made, calls = _trials("react", code, " I guessed.\nNext time, search.\n\nQuestion: more")
    reflection = next(c for c in calls if c["prompt"].endswith("Reflection:"))
    assert reflection["stop"] == [] and made[0].reflection.text == "I guessed.Next time, search.Question: more"
