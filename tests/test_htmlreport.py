"""The HTML report: what the page holds, that data cannot inject markup or script, and, in a real headless
Chromium, that the question table counts, filters, sorts and opens transcripts as it should."""

import base64
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest
from test_runs import _data, _oracle

from rawreact import read_run
from rawreact.reports.comparison import Comparison
from rawreact.reports.html import page, write_page

RAWREACT = [sys.executable, "-m", "rawreact"]
INJECTED = "</td><script>window.__pwned = 1</script><b>x"
MARKUP = '<img src="x" onerror="window.__pwned = 2">'


def _crafted(rows, tmp_path) -> tuple[Path, list[dict]]:
    """Six questions whose data and completions try every mark the page makes, and some markup."""
    rows = json.loads(json.dumps(rows[:6]))
    rows[5]["question"] = f"Which <b>bold</b> landmark {MARKUP} is this (case 5)?"
    rows[5]["context"][0][1][0] = f"A passage with markup {MARKUP} and a <script>window.__pwned = 3</script>."
    script = json.loads(Path(_oracle(rows, tmp_path / "oracle.json").removeprefix("scripted:")).read_text())
    by = script["questions"]
    q = [row["question"] for row in rows]
    title = rows[0]["supporting_facts"][0][0]
    by[q[0]] = [f" I need {title}.\nAction 1: Search[{title}]", f" Done.\nAction 2: Finish[{INJECTED}]"]
    by[q[2]] = [" I will think without acting.\nI am not sure.", *by[q[2]]]  # no action, then the oracle
    by[q[3]] = [f" Look.\nAction {i}: Search[{title}]" for i in (1, 2, 3)]  # repeats until the step limit
    by[q[4]] = [" Long.\nAction 1: Search[" + "very " * 150, f" Give up.\nAction 2: Finish[{rows[4]['answer']}x]"]
    first = rows[5]["context"][0][0]
    by[q[5]] = [f" I need {first}.\nAction 1: Search[{first}]", f" So.\nAction 2: Finish[{rows[5]['answer']}]"]
    (tmp_path / "crafted.json").write_text(json.dumps(script))
    return _data(rows, tmp_path, 6), rows


@pytest.fixture(scope="module")
def runs(rows, tmp_path_factory):
    """Two run files on the same six questions: the crafted one and an oracle that is always right."""
    tmp_path = tmp_path_factory.mktemp("html")
    data, crafted = _crafted(rows, tmp_path)
    made = {}
    for name, model in (
        ("crafted", f"scripted:{tmp_path / 'crafted.json'}"),
        ("oracle", _oracle(crafted, tmp_path / "o.json")),
    ):
        out = tmp_path / f"{name}.jsonl"
        options = ["--max-steps", "3", "--max-tokens", "60", "--repeats", "note", "--n-first", "3"]
        done = subprocess.run(
            [*RAWREACT, "run", data, "--model", model, "--out", out, "-q", *options], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        made[name] = out
    return made


def _records(path) -> list[dict]:
    return read_run(path)[1]


class _Scripts(HTMLParser):
    """Counts the elements a browser would run or load: script tags, event handlers, src and href."""

    def __init__(self):
        super().__init__()
        self.scripts, self.handlers, self.sources, self.images = 0, [], [], 0

    def handle_starttag(self, tag, attrs):
        self.scripts += tag == "script"
        self.images += tag == "img"
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        self.sources += [value for name, value in attrs if name in ("src", "href")]


def test_the_crafted_run_has_every_kind_of_step_the_page_marks(runs):
    records = {r["id"]: r for r in _records(runs["crafted"])}
    kinds = [(r["invalid_actions"], r["repeats"], r["ended"]) for r in records.values()]
    assert sum(r["invalid_actions"] for r in records.values()) >= 2  # the step without an action, the truncated one
    assert any(repeats >= 1 and ended == "max_steps" for _, repeats, ended in kinds)
    steps = [s for r in records.values() for s in r["trajectory"]["steps"]]
    assert {s["error"] for s in steps} >= {"no action", "truncated"}
    assert any(s["note"] for s in steps) and any(s["finish_reason"] == "length" for s in steps)


def test_data_and_completions_cannot_add_markup_or_script(runs):
    html = page({"crafted": runs["crafted"]}, resamples=200)
    found = _Scripts()
    found.feed(html)
    assert found.scripts == 1 and found.handlers == [] and found.images == 0
    assert found.sources and all(link.startswith(("#prompt-", "#crafted/")) for link in found.sources)  # in the page
    assert "window.__pwned" in html and "<script>window.__pwned" not in html
    assert "&lt;/td&gt;&lt;script&gt;window.__pwned = 1&lt;/script&gt;&lt;b&gt;x" in html
    # The page's policy runs its own script alone (by hash) and loads nothing from anywhere.
    script = re.search(r"<script>(.*)</script>", html, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)  # the SVG namespace is a name, not a load


def test_the_page_has_a_row_and_a_transcript_per_question_and_the_run_tables(runs):
    records = _records(runs["crafted"])
    html = page(runs, resamples=200)
    assert html.count('<tr class="question ') == 2 * len(records) == html.count('<tr class="detail" hidden>')
    for record in records:  # each row says what its record says, escaped
        assert f'data-em="{record["em"]:.0f}" data-invalid="{record["invalid_actions"]}"' in html
    comparison = Comparison(["crafted", "oracle"], {n: _records(p) for n, p in runs.items()}, resamples=200)
    crafted_row = comparison.rows()[0]
    assert f"<td>{crafted_row['EM']}</td>" in html and "<h2>Comparison</h2>" in html
    # EM, F1, steps, endings, generated, evaluated tokens, seconds; and (issue 29) F1 and generated tokens
    # per question, and the two runs' F1 question by question
    assert html.count("<svg ") == 10
    manifest = read_run(runs["crafted"])[0]
    assert manifest["config"]["prompt_sha256"][:12] in html and manifest["created"] in html


def test_each_transcript_marks_invalid_truncated_repeated_and_raw_steps(runs):
    html = page({"crafted": runs["crafted"]}, resamples=200)
    details = re.findall(r'<tr class="detail" hidden>(.*?)</tr>', html, re.S)
    records = _records(runs["crafted"])
    for record, detail in zip(records, details, strict=True):
        steps = record["trajectory"]["steps"]
        assert detail.count('class="badge bad"') == record["invalid_actions"]
        assert detail.count("repeats step") == record["repeats"]
        assert detail.count('<div class="raw">') == sum(len(s["calls"]) for s in steps)
        assert detail.count('<div class="thought">') == sum(s["thought"] is not None for s in steps)
    truncated = next(d for d, r in zip(details, records, strict=True) if "very very" in d)
    assert ">truncated</span>" in truncated


def test_the_cli_writes_the_page_and_explains_a_path_it_cannot_write(runs, tmp_path):
    out = tmp_path / "report.html"
    done = subprocess.run(
        [*RAWREACT, "report", f"A={runs['crafted']}", f"B={runs['oracle']}", "--html", out, "--resamples", "300"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote the report of 2 runs" in done.stderr and done.stdout.splitlines()[1].startswith("A ")
    assert out.read_text(encoding="utf-8") == page({"A": runs["crafted"], "B": runs["oracle"]}, resamples=300)
    out.write_text("kept")
    bad = subprocess.run(
        [*RAWREACT, "report", runs["crafted"], "--html", out / "r.html"],  # a file where a folder should be
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "report.html is a file, not a folder" in bad.stderr
    assert out.read_text() == "kept" and not list(tmp_path.glob(".*.tmp"))


def test_a_missing_run_file_is_named(tmp_path):
    done = subprocess.run(
        [*RAWREACT, "report", tmp_path / "gone.jsonl", "--html", tmp_path / "r.html"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "gone.jsonl" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.html").exists()


def _visible(browser) -> list[str]:
    """The ids of the question rows the page shows, in order."""
    return browser.evaluate(
        "Array.from(document.querySelectorAll('tr.question')).filter(r => !r.hidden && r.offsetParent !== null)"
        ".map(r => r.dataset.run + '/' + r.querySelector('td.id').textContent)"
    )


def _click(browser, selector: str) -> None:
    browser.evaluate(f"document.querySelector({json.dumps(selector)}).click()")


def _choose_run(browser, name: str) -> None:
    select = "document.getElementById('f-run')"
    browser.evaluate(f"{select}.value = {json.dumps(name)}; {select}.dispatchEvent(new Event('input'))")


def test_in_chromium_the_rows_filters_and_injected_text(runs, browser, tmp_path):
    path = write_page(runs, tmp_path / "report.html", resamples=200)
    browser.open(path)
    records = {name: _records(p) for name, p in runs.items()}
    every = [f"{name}/{r['id']}" for name, found in records.items() for r in found]
    assert _visible(browser) == every and browser.evaluate("document.getElementById('shown').textContent") == (
        f"{len(every)} of {len(every)} questions"
    )
    _click(browser, "#f-wrong")
    wrong = [f"{name}/{r['id']}" for name, found in records.items() for r in found if r["em"] != 1]
    assert _visible(browser) == wrong and 0 < len(wrong) < len(every)
    _click(browser, "#f-invalid")
    assert _visible(browser) == [
        f"{n}/{r['id']}" for n, found in records.items() for r in found if r["em"] != 1 and r["invalid_actions"]
    ]
    _click(browser, "#f-wrong")
    _click(browser, "#f-invalid")
    _click(browser, "#f-steps")
    assert _visible(browser) == [
        f"{n}/{r['id']}" for n, found in records.items() for r in found if r["ended"] == "max_steps"
    ]
    _click(browser, "#f-steps")
    _choose_run(browser, "oracle")
    assert _visible(browser) == [f"oracle/{r['id']}" for r in records["oracle"]]
    _choose_run(browser, "")
    # The injected answer is text in its cell, and no injected script or handler ran.
    cells = browser.evaluate("Array.from(document.querySelectorAll('td.prediction')).map(c => c.textContent)")
    assert INJECTED in cells and browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('img').length") == 0
    assert browser.requests() == [path.resolve().as_uri()] and browser.problems() == []


def test_in_chromium_sorting_and_opening_a_transcript(runs, browser, tmp_path):
    path = write_page({"crafted": runs["crafted"]}, tmp_path / "one.html", resamples=200)
    browser.open(path)
    records = _records(runs["crafted"])
    f1 = browser.evaluate(
        "Array.from(document.querySelectorAll('#questions th')).findIndex(h => h.textContent === 'F1')"
    )
    browser.evaluate(f"document.querySelectorAll('#questions th')[{f1}].click()")
    ascending = [f"crafted/{r['id']}" for r in sorted(records, key=lambda r: r["f1"])]
    assert _visible(browser) == ascending
    browser.evaluate(f"document.querySelectorAll('#questions th')[{f1}].click()")
    assert [v.split("/")[1] for v in _visible(browser)] == [r["id"] for r in sorted(records, key=lambda r: -r["f1"])]
    # A click opens the transcript right under its row, after the sort; raw completions show on request.
    target = max(records, key=lambda r: r["steps"])
    row = (
        "Array.from(document.querySelectorAll('tr.question'))"
        f".find(r => r.querySelector('td.id').textContent === {json.dumps(target['id'])})"
    )
    browser.evaluate(f"{row}.click()")
    assert browser.evaluate(f"{row}.nextElementSibling.hidden") is False
    steps = browser.evaluate(f"{row}.nextElementSibling.querySelectorAll('.step').length")
    assert steps == target["steps"]
    raw = f"{row}.nextElementSibling.querySelector('.raw')"
    assert browser.evaluate(f"getComputedStyle({raw}).display") == "none"
    _click(browser, "#f-raw")
    assert browser.evaluate(f"getComputedStyle({raw}).display") == "block"
    assert (
        browser.evaluate(f"{raw}.querySelector('pre').textContent")
        == target["trajectory"]["steps"][0]["calls"][0]["text"]
    )
    # The transcript links to its few-shot prompt, which the page holds once, and the link unfolds it.
    link = f"{row}.nextElementSibling.querySelector('a')"
    prompt = browser.evaluate(f"{link}.getAttribute('href')").removeprefix("#")
    assert browser.evaluate("document.querySelectorAll('details[id]').length") == 1
    assert browser.evaluate(f"document.getElementById('{prompt}').open") is False
    browser.evaluate(f"{link}.click()")
    assert browser.evaluate(f"document.getElementById('{prompt}').open") is True
    text = browser.evaluate(f"document.getElementById('{prompt}').querySelector('pre').textContent")
    assert text == records[0]["trajectory"]["prompt"]
    shot = browser.screenshot(tmp_path / "report.png")
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1280
    assert browser.problems() == []


def test_in_chromium_a_question_has_a_link_that_opens_it_and_nothing_scrolls_sideways(runs, browser, tmp_path):
    """Issue 29 item 11: `#RUN/ID` opens that question, a prompt wraps, and at 700 pixels the page itself
    does not scroll sideways (wide tables scroll inside their own box)."""
    path = write_page(runs, tmp_path / "report.html", resamples=200)
    records = {name: _records(p) for name, p in runs.items()}
    name, record = "crafted", records["crafted"][-1]
    anchor = f"{name}/{record['id']}"
    browser.open(path, fragment=quote(anchor))
    row = f"document.getElementById({json.dumps(anchor)})"
    assert browser.evaluate(f"{row}.classList.contains('open') && !{row}.nextElementSibling.hidden") is True
    assert browser.evaluate(f"{row}.querySelector('td.id a').getAttribute('href')") == f"#{anchor}"
    opened = "Array.from(document.querySelectorAll('tr.question.open')).map(r => r.id)"
    assert browser.evaluate(opened) == [anchor]
    other = f"{name}/{records[name][0]['id']}"
    browser.evaluate(f"document.getElementById({json.dumps(other)}).querySelector('td.id a').click()")
    assert browser.evaluate(opened) == [other, anchor] or browser.evaluate(opened) == [anchor, other]
    assert set(browser.evaluate("Array.from(document.querySelectorAll('details pre')).map(p => "
                                "getComputedStyle(p).whiteSpace)")) == {"pre-wrap"}  # fmt: skip
    browser.call("Emulation.setDeviceMetricsOverride", session=True, width=700, height=900, deviceScaleFactor=1,
                 mobile=False)  # fmt: skip
    assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth") is True
    assert browser.evaluate("document.querySelector('table.summary').getBoundingClientRect().width") > 700


def test_the_page_breaks_scores_down_by_type_level_and_ending(runs, browser, tmp_path):
    """Issue 29 item 9: per run, EM and F1 by HotpotQA type and level and by ending, counted, with intervals."""
    from rawreact.reports.breakdown import breakdown

    records = {name: _records(p) for name, p in runs.items()}
    assert all(r["kind"].count("/") == 1 for found in records.values() for r in found)  # type/level kept
    rows = breakdown(records, resamples=200)
    for name, found in records.items():
        for by, key in (("type", lambda r: r["kind"].split("/")[0]), ("level", lambda r: r["kind"].split("/")[1])):
            mine = {row["group"]: row for row in rows if row["run"] == name and row["by"] == by}
            groups = {key(r) for r in found}
            if len(groups) < 2:
                assert not mine
                continue
            for group in groups:
                members = [r for r in found if key(r) == group]
                em = sum(r["em"] for r in members) / len(members)
                assert mine[group]["n"] == str(len(members)) and mine[group]["EM"].startswith(f"{em:.3f} [")
    crafted_endings = {row["group"]: int(row["n"]) for row in rows if row["run"] == "crafted" and row["by"] == "ended"}
    assert crafted_endings == dict(Counter(r["ended"] for r in records["crafted"]))
    path = write_page(runs, tmp_path / "report.html", resamples=200)
    browser.open(path)
    shown = browser.evaluate("document.querySelectorAll('table.breakdown tbody tr').length")
    assert shown == len(rows) and browser.problems() == []


def test_the_page_charts_per_question_distributions_and_two_runs_question_by_question(runs, browser, tmp_path):
    """Issue 29 item 10: F1 and generated tokens per question (meaningful for one run), and a scatter of
    the first two runs' F1 on their shared questions, checked as Chromium draws them."""
    records = {name: _records(p) for name, p in runs.items()}
    path = write_page(runs, tmp_path / "report.html", resamples=200)
    browser.open(path)
    chart = "Array.from(document.querySelectorAll('svg.chart')).find(s => s.getAttribute('aria-label') === {})"
    f1 = chart.format(json.dumps("Questions by F1"))
    bars = browser.evaluate(f"Array.from({f1}.querySelectorAll('rect title')).map(t => t.textContent)")
    counted = {}
    for text in bars:  # "crafted: 2 with to .5"
        name, rest = text.split(": ", 1)
        counted[name] = counted.get(name, 0) + int(rest.split(" with ")[0])
    assert counted == {name: sum(r["f1"] is not None for r in found) for name, found in records.items()}
    ones = [t for t in bars if t.startswith("oracle: ") and t.endswith(" with 1")]
    assert ones == [f"oracle: {len(records['oracle'])} with 1"]  # the oracle is always right
    scatter = chart.format(json.dumps("F1 per question: oracle against crafted"))
    dots = browser.evaluate(f"Array.from({scatter}.querySelectorAll('circle')).map(c => Number(c.dataset.n))")
    assert sum(dots) == len(records["crafted"])  # one dot per shared question, or a larger one for several
    tokens = chart.format(json.dumps("Questions by generated tokens"))
    per_run = browser.evaluate(f"Array.from({tokens}.querySelectorAll('rect title')).map(t => t.textContent)")
    assert sum(int(t.split(": ", 1)[1].split(" with ")[0]) for t in per_run if t.startswith("crafted: ")) == 6
    assert browser.problems() == []


def test_in_chromium_runs_side_by_side_question_by_question_with_the_first_difference_marked(runs, browser, tmp_path):
    """Issue 29 item 8: each question two runs share appears once with every run's answer, and opens the two
    chosen runs' transcripts next to each other, the first step where they differ marked."""
    from rawreact.agents.record import Trajectory
    from rawreact.reports.html_questions import step_key

    records = {name: {r["id"]: r for r in _records(p)} for name, p in runs.items()}
    path = write_page(runs, tmp_path / "report.html", resamples=200)
    browser.open(path)
    rows = "Array.from(document.querySelectorAll('#pairs tr.pair'))"
    assert browser.evaluate(f"{rows}.map(r => r.querySelector('td.id').textContent)") == list(records["crafted"])
    predictions = "Array.from(r.querySelectorAll('td.answer .prediction')).map(c => c.textContent)"
    cells = browser.evaluate(f"{rows}.map(r => {predictions})")
    assert cells == [[records[n][q]["prediction"] for n in ("crafted", "oracle")] for q in records["crafted"]]

    def keys(name, question):
        return [step_key(s) for s in Trajectory.from_dict(records[name][question]["trajectory"]).steps]

    first_difference = {}
    for question in records["crafted"]:
        a, b = keys("crafted", question), keys("oracle", question)
        same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        first_difference[question] = None if a == b else same
    assert None in first_difference.values() and any(first_difference.values())  # both cases are tried
    marked = (
        "Array.from(document.getElementById({}).nextElementSibling.querySelectorAll('.side')).map(side => "
        "[side.querySelector('h4').textContent, Array.from(side.querySelectorAll('.step')).findIndex(s => "
        "s.classList.contains('first-difference')), side.querySelectorAll('.step').length])"
    )
    for question, differs in first_difference.items():
        anchor = json.dumps(f"pair/{question}")
        browser.evaluate(f"document.getElementById({anchor}).click()")
        sides = browser.evaluate(marked.format(anchor))
        assert [s[0] for s in sides] == ["crafted", "oracle"]
        assert [s[2] for s in sides] == [len(keys("crafted", question)), len(keys("oracle", question))]
        expected = [-1 if differs is None or differs >= s[2] else differs for s in sides]
        assert [s[1] for s in sides] == expected, question
        same = f"document.getElementById({anchor}).nextElementSibling.querySelectorAll('.same').length"
        assert browser.evaluate(same) == (differs is None)
    # Swapping the runs swaps the sides; the filter keeps the questions whose two answers differ.
    choose = "(() => {{ const c = document.getElementById('{}'); c.{} = {}; c.dispatchEvent(new Event('input')) }})()"
    browser.evaluate(choose.format("p-left", "value", "'oracle'"))
    browser.evaluate(choose.format("p-right", "value", "'crafted'"))
    anchor = json.dumps(f"pair/{next(iter(records['crafted']))}")
    assert [s[0] for s in browser.evaluate(marked.format(anchor))] == ["oracle", "crafted"]
    browser.evaluate(choose.format("p-differ", "checked", "true"))
    differ = sum(records["crafted"][q]["prediction"] != records["oracle"][q]["prediction"] for q in records["crafted"])
    assert browser.evaluate(f"{rows}.filter(r => !r.hidden).length") == differ
    assert browser.evaluate("document.getElementById('p-shown').textContent") == f"{differ} of 6 questions"
    # A link to the question opens it, as opening the page at that address does.
    last = list(records["crafted"])[-1]
    browser.open(write_page(runs, tmp_path / "linked.html", resamples=200), fragment=quote(f"pair/{last}"))
    assert browser.evaluate(f"!document.getElementById({json.dumps(f'pair/{last}')}).nextElementSibling.hidden")
    assert browser.problems() == []


def test_one_run_or_runs_with_no_shared_question_have_no_side_by_side_view(runs):
    from rawreact.reports.sidebyside import shared, side_by_side

    records = {name: _records(p) for name, p in runs.items()}
    assert side_by_side({"crafted": records["crafted"]}) == ""
    assert side_by_side({"a": records["crafted"][:3], "b": records["oracle"][3:]}) == ""
    ids = [r["id"] for r in records["crafted"]]
    # 2 and 3 are in a and b, 5 in b and c; 4 is in b alone
    assert shared({"a": records["crafted"][:4], "b": records["oracle"][2:], "c": records["oracle"][5:]}) == [
        ids[2],
        ids[3],
        ids[5],
    ]
