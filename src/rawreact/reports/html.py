"""One self-contained HTML page of one or several run files: the summary table, the comparison with
intervals, charts as inline SVG, a table of questions to sort and filter, and every transcript.

The page needs no network: its style, script and charts are inside it, and its Content Security
Policy lets it load nothing else and run no script but its own. Everything that came from data or a
model (questions, passages, completions, answers, run names) is escaped where it is written.
"""

import base64
import hashlib
from collections import Counter
from html import escape
from pathlib import Path

from rawreact import __version__
from rawreact.agents.guardrails import ENDINGS
from rawreact.core.errors import DataError
from rawreact.core.resources import source_named
from rawreact.core.stats import RESAMPLES, intervals_said, score_interval
from rawreact.core.tasks import TASK_TYPES, TaskType, of_records, task_type
from rawreact.core.text import plural
from rawreact.reports import svg
from rawreact.reports.breakdown import breakdown, breakdown_note
from rawreact.reports.comparison import Comparison
from rawreact.reports.html_questions import prompts_html, questions_table
from rawreact.reports.sidebyside import side_by_side
from rawreact.reports.summary import ESSENTIAL, drop_unused, row_of, summarize, times_note
from rawreact.reports.trials import TRIALS_NOTE, trial_rows, trial_stats
from rawreact.runs.records import read_run
from rawreact.runs.runfile import write_whole
from rawreact.tasks.fever import label_table

_ASSETS = Path(__file__).parent / "assets"  # the page's style and script
# How episodes ended, each a colour of its own in the chart (the tolerant loop's endings first).
ENDING_COLOURS = dict(
    zip(
        ENDINGS,
        (
            "#009e73",
            "#e69f00",
            "#cc79a7",
            "#999999",
            "#d55e00",
            "#56b4e9",
            "#0072b2",
            "#332288",
            "#882255",
            "#44aa99",
            "#ddcc77",
        ),  # fmt: skip
        strict=True,
    )
)


ENDING_COLOURS |= {"passed": "#009e73", "failed": "#d55e00"}  # a program's verdict


# The scores a chart is drawn of, in the order the task types declare them, each by its label.
SCORES: dict[str, str] = {}
for _type in TASK_TYPES.values():  # a key two types share (success) keeps its first label
    for _score in _type.scores:
        SCORES.setdefault(_score.key, _score.label[:1].upper() + _score.label[1:])


def page(runs: dict[str, str | Path], *, resamples: int = RESAMPLES, seed: int = 0) -> str:
    """The HTML text of the report of `runs` ({name: run file}), the first being the comparison's base."""
    if not runs:
        raise DataError("a report needs at least one run file")
    loaded = {name: read_run(path) for name, path in runs.items()}
    records = {name: found for name, (_, found) in loaded.items()}
    script = (_ASSETS / "report.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    # Nothing to load but its own style and script, no <base> to redirect links, no form to send. Markup
    # could still navigate (<meta http-equiv="refresh">, which no policy blocks): every value is escaped.
    policy = (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'; "
        "base-uri 'none'; form-action 'none'"
    )
    names = ", ".join(runs)
    total = sum(len(found) for found in records.values())
    task = of_records([r for found in records.values() for r in found])
    unit = task.unit  # question, game, episode, problem
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>rawreact report: {escape(names)}</title>",
        f"<style>{(_ASSETS / 'report.css').read_text(encoding='utf-8')}</style></head><body>",
        f"<h1>rawreact report: {escape(names)}</h1>",
        f'<p class="lede">{plural(len(runs), "run")}, {total} {unit} records; '
        f"written by rawreact {escape(__version__)}. Click a {unit} to see its transcript.</p>",
        "<h2>Summary</h2>",
        _split(drop_unused([row_of(name, *read) for name, read in loaded.items()]), _SCORES),
        f'<p class="note">Times: {escape(times_note(unit))}.</p>',
        _inputs(runs, {name: manifest for name, (manifest, _) in loaded.items()}),
        _labels(records),
        _trials(records),
        _breakdown(records, task, resamples, seed),
        _comparison(records, resamples, seed),
        _trees(records),
        "<h2>Charts</h2>",
        _charts(records, task, resamples, seed),
        side_by_side(records),
        f"<h2>{unit.capitalize()}s</h2>",
        questions_table(records),
        prompts_html(records),
        f"<script>{script}</script></body></html>",
    ]
    return "\n".join(part for part in parts if part) + "\n"


def write_page(runs: dict[str, str | Path], out: str | Path, **options) -> Path:
    """Write the report of `runs` to `out`, whole or not at all."""
    return write_whole(out, page(runs, **options), "choose another --html path")


def _table(rows: list[dict[str, str]], cls: str) -> str:
    """Rows of text as an HTML table, every cell escaped."""
    if not rows:
        return ""
    head = "".join(f"<th>{escape(h)}</th>" for h in rows[0])
    body = "".join("<tr>" + "".join(_cell_html(v) for v in row.values()) + "</tr>" for row in rows)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _cell_html(value: str) -> str:
    """A table cell; a long one (a model's path, a file) may break anywhere, so the table fits its window."""
    return f'<td class="long">{escape(value)}</td>' if len(value) > 32 else f"<td>{escape(value)}</td>"


# The columns of the first of the two tables a wide table is split into (each keeps its first column):
# what a run scored, then what it did and cost.
_SCORES = ("method", "loop", "model", "grammar", "n", "scored", "EM", "F1", "finished", "supported", "EM supp")
_SCORES += ("EM unsupp", "score", "success", "pass@1", "reward", "invalid/step")
_SCORES += ("vote share", "answered by")
_INTERVALS = ("method", "loop", *(c for c in ESSENTIAL if c != "scored"))  # a comparison's first table


def _split(rows: list[dict[str, str]], first: tuple[str, ...]) -> str:
    """A wide table as two: its first column with the `first` columns, then with the others."""
    if not rows:
        return ""
    key = next(iter(rows[0]))
    heads = [[key] + [h for h in rows[0] if h in first], [key] + [h for h in rows[0] if h != key and h not in first]]
    return "".join(_table([{h: row[h] for h in head} for row in rows], "summary") for head in heads)


def _inputs(runs: dict[str, str | Path], manifests: dict[str, dict | None]) -> str:
    """What each run was made from, as its manifest says: the trace of its numbers to their inputs."""
    rows = []
    for name, manifest in manifests.items():
        config = (manifest or {}).get("config", {})
        rows.append(
            {
                "run": name,
                "file": str(runs[name]),
                "created": str((manifest or {}).get("created", "?")),
                "data": str((manifest or {}).get("data") or config.get("question") or "?"),
                "data sha256": str(config.get("data_sha256") or "-")[:12],
                "model sha256": str(config.get("model_sha256") or "-")[:12],
                "prompt sha256": str(config.get("prompt_sha256") or "-")[:12],
                "passages": str(config.get("passages") or "own"),
                "passages sha256": str(config.get("passages_sha256") or "-")[:12],
                "rawreact": str((manifest or {}).get("rawreact", "?")),
                "code": source_named((manifest or {}).get("source")),
            }
        )
    return '<h3>Inputs</h3><p class="note">From each run\'s manifest ("?": the manifest is missing).</p>' + _table(
        rows, "inputs"
    )


def _labels(records: dict[str, list[dict]]) -> str:
    """FEVER runs: label accuracy per gold label, and what was answered; empty for other runs."""
    rows = label_table(records)
    if not rows:
        return ""
    return '<h3>Labels</h3><p class="note">FEVER claims by gold label ("none": no label could be read).</p>' + _table(
        rows, "labels"
    )


# The bins of per-question F1, and how many bins the per-question token counts get.
F1_BINS = ("0", "to .25", "to .5", "to .75", "below 1", "1")
TOKEN_BINS = 8


def _f1_bin(f1: float) -> int:
    return 0 if f1 == 0 else 5 if f1 == 1 else 1 + min(int(f1 * 4), 3)


def _distributions(filled: dict[str, list[dict]], unit: str = "question") -> list[str]:
    """Per-question distributions, which say something even for one run: F1 and generated tokens, and
    for two runs or more, the first two runs' F1 question by question."""
    charts = []
    scored = [(name, [r for r in found if r["f1"] is not None]) for name, found in filled.items()]
    if any(found for _, found in scored):
        f1 = [(name, Counter(_f1_bin(r["f1"]) for r in found)) for name, found in scored]
        charts.append(svg.histogram("Questions by F1", f1, list(F1_BINS)))
    most = max(r["tokens"]["completion"] for found in filled.values() for r in found)
    width = max(1, -(-(most + 1) // TOKEN_BINS))  # whole tokens per bin, so that TOKEN_BINS bins hold them all
    names = [f"{k * width}-{(k + 1) * width - 1}" for k in range(TOKEN_BINS)]
    tokens = [(name, Counter(r["tokens"]["completion"] // width for r in found)) for name, found in filled.items()]
    charts.append(svg.histogram(f"{unit.capitalize()}s by generated tokens", tokens, names))
    if len(filled) >= 2:
        (a, first), (b, second) = list(filled.items())[:2]
        theirs = {r["id"]: r["f1"] for r in second if r["f1"] is not None}
        points = [(r["f1"], theirs[r["id"]], r["id"]) for r in first if r["f1"] is not None and r["id"] in theirs]
        if points:
            charts.append(svg.scatter(f"F1 per question: {b} against {a}", points, f"{a} F1", f"{b} F1"))
    return charts


TREES = 12  # the LATS searches a page draws, the first questions of each run


def _trees(records: dict[str, list[dict]]) -> str:
    """LATS's search trees, one picture a question (the first TREES of each run); empty without a LATS run."""
    drawn = []
    for name, found in records.items():
        searched = [r for r in found if r.get("lats")][:TREES]
        for record in searched:
            tree = record["lats"]
            title = f"{name}: {record['id']}, {record.get('ended')} ({tree['ended']}, {tree['iterations']} iterations)"
            drawn.append(f'<figure class="tree">{svg.search_tree(title, tree["nodes"], tree["chosen"])}'
                         f"<figcaption>{escape(title)}</figcaption></figure>")  # fmt: skip
    if not drawn:
        return ""
    note = (
        "Each LATS search as a tree: a node a step, coloured by its value (red -1, grey 0, green 1), ringed when "
        "terminal (green: a finish of reward 1); the path to the chosen node thick; a rollout's nodes, which the tree "
        "does not keep, on dashed edges. Hover a node for its step. A rollout takes the first terminal sample of its "
        "step, as LATS's lats.py does, so a winning finish sampled after a losing one is drawn (a green ring on a "
        "dashed edge) though the rollout ended at the loser, and the search cannot choose it."
    )
    return f'<h2>Search trees</h2><p class="note">{escape(note)}</p>' + "".join(drawn)


def _breakdown(records: dict[str, list[dict]], task: TaskType, resamples: int, seed: int) -> str:
    """Scores by question type, level and ending, where the runs' records allow; empty otherwise."""
    rows = breakdown(records, resamples=resamples, seed=seed)
    if not rows:
        return ""
    return f'<h3>Breakdown</h3><p class="note">{escape(breakdown_note(rows, task))}</p>' + _table(rows, "breakdown")


def _comparison(records: dict[str, list[dict]], resamples: int, seed: int) -> str:
    """Several runs on their shared questions, with intervals; empty for one run."""
    if len(records) < 2:
        return ""
    comparison = Comparison(list(records), records, resamples, seed)
    unit = comparison.task.unit
    if not comparison.ids:
        return f'<h2>Comparison</h2><p class="note">The runs have no {unit} in common, so none is compared.</p>'
    return (
        "<h2>Comparison</h2>"
        f'<p class="note">On the {len(comparison.ids)} {unit}s every run answered; '
        f"{escape(intervals_said(len(comparison.ids), comparison.task))} ({resamples} resamples, seed {seed}); "
        "Δ is paired against "
        f"{escape(comparison.names[0])}.</p>" + _split(comparison.rows(), _INTERVALS)
    )


def _trials(records: dict[str, list[dict]]) -> str:
    """The Reflexion runs' section: EM after each trial, a line per run (the Reflexion paper's figure), and the
    table of each trial's questions, verdicts and cost. Empty when no run has trials."""
    rows = trial_rows(records)
    if not rows:
        return ""
    metric = of_records([r for found in records.values() for r in found]).headline.key  # EM; a game's: success
    label = SCORES[metric]
    series = [
        (name, [(s["trial"], s[metric]) for s in trial_stats(found) if s.get(metric) is not None])
        for name, found in records.items()
    ]
    chart = svg.lines(f"{label} after each trial", [item for item in series if item[1]], "trial", label)
    return (
        '<h2 id="trials">Trials</h2>'
        f'<div class="charts"><figure>{chart}</figure></div>'
        + _table(rows, "trials")
        + f'<p class="note">{escape(TRIALS_NOTE[0].upper() + TRIALS_NOTE[1:])}.</p>'
    )


def _charts(records: dict[str, list[dict]], task: TaskType, resamples: int, seed: int) -> str:
    """EM and F1 with intervals, steps per question, endings, tokens and seconds per question."""
    filled = {name: found for name, found in records.items() if found}
    if not filled:
        return '<p class="note">No question has finished yet.</p>'
    summaries = {name: summarize(found) for name, found in filled.items()}
    unit, charts = task.unit, []
    labels = SCORES | {s.key: s.label[:1].upper() + s.label[1:] for s in task.scores}  # a program's: Pass@1
    for metric, label in labels.items():  # every score a task type declares: EM and F1, a game's success and reward
        rows = []
        for name, found in filled.items():
            scored = [r[metric] for r in found if r.get(metric) is not None]  # no gold answer, no score
            if scored:
                drawn = score_interval(metric, scored, resamples=resamples, seed=seed)
                rows.append((name, drawn.mean, drawn.low, drawn.high))
        if rows:  # a run whose questions have no gold answer has no score to chart
            charts.append(svg.intervals(f"{label} per run, with its 95% interval", rows))
    steps = [(name, Counter(r["steps"] for r in found)) for name, found in filled.items()]
    charts.append(
        svg.histogram(f"{unit.capitalize()}s by {'implementations' if task.writes_programs else 'steps'} taken", steps)
    )
    endings = [(name, s["endings"]) for name, s in summaries.items()]
    colours = ENDING_COLOURS | {e: "#333333" for _, counts in endings for e in counts if e not in ENDING_COLOURS}
    charts.append(svg.shares(f"How {'problems' if task.writes_programs else 'episodes'} ended", endings, colours))
    generated = [(name, s["completion_tokens"]) for name, s in summaries.items()]
    charts.append(svg.bars(f"Generated tokens per {unit}", generated, "{:.0f}"))
    evaluated = [(name, s["evaluated_tokens"]) for name, s in summaries.items() if s["evaluated_tokens"] is not None]
    if evaluated:
        charts.append(svg.bars(f"Evaluated prompt tokens per {unit}", evaluated, "{:.0f}"))
    charts.append(svg.bars(f"Seconds per {unit}", [(name, s["seconds"]) for name, s in summaries.items()]))
    charts += _distributions(filled, unit)
    unscored = (
        ""
        if any(task_type(r.get("task")).scored(r) for found in filled.values() for r in found)
        else ('<p class="note">No question has a gold answer, so there is no EM or F1 to chart.</p>')
    )
    return unscored + '<div class="charts">' + "".join(f"<figure>{c}</figure>" for c in charts) + "</div>"
