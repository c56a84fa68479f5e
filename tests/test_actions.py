"""The parser: every row of docs/parser.md, and properties over arbitrary text."""

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from rawreact import VERBS, Action, format_action, parse_action, parse_step
from rawreact.core.actions import split_step

DOC = (__import__("pathlib").Path(__file__).parent.parent / "docs" / "parser.md").read_text(encoding="utf-8")


def _cell(text: str) -> str:
    """A table cell's code span as the text it shows, with `\\n` standing for a line break."""
    text = text.strip()
    if text == "nothing":
        return text
    match = re.fullmatch(r"(`+)(.*?)\1", text)
    assert match, f"cell is not a code span: {text!r}"
    inner = match.group(2)
    if len(inner) > 1 and inner[0] == inner[-1] == " " and inner.strip():
        inner = inner[1:-1]
    return inner.replace("\\n", "\n")


def _rows(heading: str) -> list[list[str]]:
    section = DOC.split(heading, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    return [[cell for cell in re.split(r" \| ", line.strip("| "))] for line in lines[1:]]


def _expected(cell: str) -> Action | None:
    return None if cell == "nothing" else parse_action(cell)


ACTION_ROWS = _rows("## `parse_action`")
STEP_ROWS = _rows("## `parse_step`")


def test_the_tables_have_every_row():
    assert len(ACTION_ROWS) == 35 and len(STEP_ROWS) == 12


@pytest.mark.parametrize("form, text, action", ACTION_ROWS, ids=[row[0] for row in ACTION_ROWS])
def test_parse_action_table(form, text, action):
    expected = None if action == "nothing" else _cell(action)
    parsed = parse_action(_cell(text), truncated="(cut)" in form)
    assert (None if parsed is None else format_action(parsed)) == expected


@pytest.mark.parametrize("form, completion, thought, action", STEP_ROWS, ids=[row[0] for row in STEP_ROWS])
def test_parse_step_table(form, completion, thought, action):
    expected = None if action == "nothing" else _cell(action)
    got_thought, parsed = parse_step(_cell(completion), 1, truncated="(cut)" in form)
    assert got_thought == _cell(thought)
    assert (None if parsed is None else format_action(parsed)) == expected


def test_canonical_examples():
    assert parse_action("Search[Milan]") == Action("search", "Milan")
    assert parse_action("Finish[]") == Action("finish", "")
    assert format_action(Action("lookup", "river Tam")) == "Lookup[river Tam]"
    with pytest.raises(ValueError, match="unknown action 'open'"):  # not a verb of the passage set
        format_action(Action("open", "x"))


# An argument in canonical form: no line break, no surrounding white space, brackets balanced,
# and not wrapped in one pair of quotes (which the parser removes).
_plain = st.text(st.characters(blacklist_characters="[]\r\n", blacklist_categories=("Cs",)), max_size=12)
_nested = st.recursive(
    _plain, lambda inner: st.builds(lambda a, b, c: f"{a}[{b}]{c}", _plain, inner, _plain), max_leaves=4
)
_QUOTE_PAIRS = {('"', '"'), ("'", "'"), ("`", "`"), ("\u201c", "\u201d"), ("\u2018", "\u2019")}
canonical_args = _nested.filter(lambda a: a == a.strip() and not (len(a) >= 2 and (a[0], a[-1]) in _QUOTE_PAIRS))
actions = st.builds(Action, st.sampled_from(sorted(VERBS)), canonical_args)


@given(st.text(), st.booleans())
def test_parse_action_never_raises(text, truncated):
    result = parse_action(text, truncated=truncated)
    assert result is None or result.name in VERBS


@given(st.text(), st.booleans())
def test_parse_step_never_raises(text, truncated):
    thought, action = parse_step(text, 1, truncated=truncated)
    assert "\n" not in thought and (action is None or action.name in VERBS)


@given(actions)
def test_round_trip(action):
    assert parse_action(format_action(action)) == action


@given(st.text(), st.booleans())
def test_what_the_parser_reads_is_echoed_in_a_form_that_reads_back_the_same(text, truncated):
    action = parse_action(text, truncated=truncated)
    if action is not None:
        assert parse_action(format_action(action)) == action


def test_an_argument_that_leaves_a_bracket_open_is_no_action():
    assert parse_action("Search[[") is None and parse_action("Search[a [b") is None
    assert parse_action("Search[a [b]") == Action("search", "a [b]")


@given(actions, st.data())
def test_verb_case_does_not_matter(action, data):
    text = format_action(action)
    verb = VERBS[action.name]
    flips = data.draw(st.lists(st.booleans(), min_size=len(verb), max_size=len(verb)))
    cased = "".join(c.swapcase() if flip else c for c, flip in zip(verb, flips, strict=True))
    assert parse_action(cased + text[len(verb) :]) == action


@given(actions, st.text(" \t\n", max_size=5), st.text(" \t\n", max_size=5))
def test_surrounding_whitespace_does_not_matter(action, before, after):
    assert parse_action(before + format_action(action) + after) == action


@given(actions, st.integers(0, 99) | st.none(), st.integers(1, 3))
def test_action_prefix_does_not_matter(action, number, repeats):
    prefix = ("Action: " if number is None else f"Action {number}: ") * repeats
    assert parse_action(prefix + format_action(action)) == action


@given(actions, st.text())
def test_trailing_text_does_not_matter(action, trailing):
    assert parse_action(format_action(action) + trailing) == action


@given(actions, st.integers(1, 9), st.text(st.characters(blacklist_characters="\r\n"), max_size=30))
def test_parse_step_reads_the_reference_shape(action, i, thought):
    assume(split_step(thought)[1] is None)  # a thought line that is itself an action line counts first
    completion = f" {thought}\nAction {i}: {format_action(action)}\nObservation {i}: invented"
    got_thought, got_action = parse_step(completion, i)
    assert got_action == action
    assert got_thought == re.sub(r"^(?:\s*thought\s*\d*\s*:)+\s*", "", " ".join(thought.split()), flags=re.I)
