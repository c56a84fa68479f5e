"""The report page's runs side by side: each question that two runs or more share, once, with every run's
answer, score and ending, and a view of two runs' transcripts next to each other.

The view copies each transcript from the question table when it opens (the page holds it once) and marks
the first step where the two differ, which it tells by each step's key (`html_questions.step_key`).
"""

from html import escape

from rawreact.core.tasks import of_records, task_type
from rawreact.core.text import plural
from rawreact.reports.html_questions import question_anchor
from rawreact.reports.summary import game_score, score


def shared(records: dict[str, list[dict]]) -> list[str]:
    """The ids that two runs or more answered, in the order the runs first give them."""
    counts: dict[str, int] = {}
    for found in records.values():
        for question in dict.fromkeys(r["id"] for r in found):
            counts[question] = counts.get(question, 0) + 1
    return [question for question, n in counts.items() if n >= 2]


def side_by_side(records: dict[str, list[dict]]) -> str:
    """The section, or nothing when fewer than two runs share a question."""
    ids = shared(records) if len(records) >= 2 else []
    if not ids:
        return ""
    by_run = {name: {r["id"]: r for r in found} for name, found in records.items()}
    names = list(records)
    options = [
        "".join(f'<option value="{escape(n)}"{" selected" * (n == pick)}>{escape(n)}</option>' for n in names)
        for pick in names[:2]
    ]
    controls = (
        '<div id="p-controls">'
        f'<label>left <select id="p-left">{options[0]}</select></label> '
        f'<label>right <select id="p-right">{options[1]}</select></label> '
        '<label><input type="checkbox" id="p-differ"> where the two answers differ</label>'
        '<span id="p-shown"></span></div>'
    )
    unit = of_records([r for found in records.values() for r in found]).unit
    head = "".join(f"<th>{escape(h)}</th>" for h in ("id", unit, "gold", *names))
    rows = []
    for question in ids:
        first = next(by_run[name][question] for name in names if question in by_run[name])
        asked = escape(first["question"])
        if isinstance(first.get("program"), dict):  # a problem of a program: its signature and docstring, as code
            asked = f'<pre class="code">{asked}</pre>'
        cells = [
            f'<td class="id"><a href="#{escape(_anchor(question))}">{escape(question)}</a></td>',
            f'<td class="q">{asked}</td>',
            f'<td class="gold">{escape(first["answer"])}</td>',
        ]
        cells += [_answer(name, by_run[name].get(question)) for name in names]
        rows.append(
            f'<tr class="pair" id="{escape(_anchor(question))}">{"".join(cells)}</tr>'
            f'<tr class="pair-detail" hidden><td colspan="{3 + len(names)}"><div class="sides">'
            '<div class="side"></div><div class="side"></div></div></td></tr>'
        )
    note = (
        f"The {len(ids)} {unit}{'s' if len(ids) != 1 else ''} that two runs or more answered, each once with "
        f"every run's answer (score and ending). Click a {unit} to see the left and right runs' transcripts "
        "side by side; the first step where they differ (thought, action or observation) is marked."
    )
    return (
        f'<h2>{unit.capitalize()} by {unit}</h2><p class="note">{escape(note)}</p>{controls}'
        f'<div class="scroll"><table id="pairs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
        "</table></div>"
    )


def _anchor(question: str) -> str:
    return question_anchor("pair", question)


def _answer(run: str, record: dict | None) -> str:
    """One run's cell: its prediction, EM and F1 and how it ended, or a dash when it has no such question."""
    if record is None:
        return f'<td class="answer missing" data-run="{escape(run)}">-</td>'
    game = task_type(record.get("task")).scoring == "outcome"
    em = record.get("success") if game else record["em"]  # a game is right when won
    verdict = "right" if em == 1 else "wrong" if em is not None else "unscored"
    scores = (
        game_score(em, record.get("reward"))
        if game
        else f"EM {score(record['em'], '{:.0f}')}, F1 {score(record['f1'], '{:.2f}')}"
    )
    meta = f"{scores}, {record['ended']} after {plural(record['steps'], 'step')}"
    if isinstance(record.get("program"), dict):  # a program: the hidden tests' verdict, after its implementations
        reason = (record["program"].get("hidden") or {}).get("reason", "")
        meta = f"{record['ended']} after {plural(record['steps'], 'implementation')}"
        meta += f" ({reason})" if reason and reason != "passed" else ""
    prediction = escape(str(record["prediction"]))
    where = f'data-run="{escape(run)}" data-anchor="{escape(question_anchor(run, record["id"]))}"'
    shown = (
        f'<pre class="prediction code">{prediction}</pre>'  # a program: its lines and indentation, as code
        if isinstance(record.get("program"), dict)
        else f'<span class="prediction">{prediction}</span>'
    )
    return (
        f'<td class="answer {verdict}" {where} data-prediction="{prediction}">'
        f'{shown}<span class="meta">{escape(meta)}</span></td>'
    )
