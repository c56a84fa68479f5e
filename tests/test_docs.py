"""The documentation site (issue 43): it builds with `mkdocs build --strict`, its reference pages are what the
code generates, and every code block on it runs, or says why it is not run here."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rawreact.cli.reference import pages

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CHARTS = ("cpu-by-setting.svg", "wall-under-load.svg", "reflexion-by-trial.svg")  # scripts/charts.py draws them
NOT_RUN = re.compile(r"<!-- not run by the docs test: (.{10,}) -->")
RUN_BY = re.compile(r"<!-- run by (tests/test_\w+\.py::test_\w+) -->")


def test_the_reference_pages_are_what_the_code_generates():
    """An option or a setting changed without `python scripts/docs_reference.py` fails here."""
    for name, text in pages().items():
        assert (DOCS / "reference" / name).read_text(encoding="utf-8") == text, (
            f"docs/reference/{name} is stale; run python scripts/docs_reference.py"
        )


def test_the_collection_layout_is_on_the_site_as_envs_readme_says_it():
    """Issue 60 item 6: envs/README.md (the layout of a passage collection) is a page of the site, kept equal to it."""
    page = (DOCS / "reference" / "collections.md").read_text(encoding="utf-8")
    readme = (DOCS.parent / "envs" / "README.md").read_text(encoding="utf-8")
    assert page.endswith(readme) and page.startswith("<!-- generated from envs/README.md"), (
        "docs/reference/collections.md is stale; run python scripts/docs_reference.py"
    )
    assert "Passage collections: reference/collections.md" in (DOCS.parent / "mkdocs.yml").read_text(encoding="utf-8")


def test_the_reference_pages_name_every_command_option_and_setting():
    from rawreact.config.settings import KEYS

    commands, settings = pages()["commands.md"], pages()["settings.md"]
    for command in ("run", "compare", "report", "compare-runs", "export", "index", "games", "show", "merge"):
        assert f"## `rawreact {command}`" in commands
    assert "| `--env` |" in commands and "| `--recipe` |" in commands
    assert all(f"| `{key}` |" in settings for key in KEYS)


def test_the_python_reference_names_every_public_name_with_its_docstring():
    """Issue 60 item 2: the Python API reference is generated from the public names, each with its docstring."""
    import rawreact

    page = pages()["python.md"]
    for name in rawreact.__all__:
        assert f"### `{name}" in page, name
    assert "### `react`\n\n```py\nreact(\n    question: str," in page
    assert (rawreact.react.__doc__ or "").strip().splitlines()[0] in page
    assert " at 0x" not in page  # no default's address: the page is the same on every machine


def test_the_site_builds_strict(tmp_path):
    """A broken link, a page missing from the navigation or a bad page fails the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for page in (
        "index.html",
        "getting-started/index.html",
        "environments/index.html",
        "reference/commands/index.html",
    ):
        assert (tmp_path / "site" / page).is_file(), page
    assert "Commands and options" in (tmp_path / "site" / "reference" / "commands" / "index.html").read_text()
    # No page asks a third party for anything (Material asks Google Fonts unless told not to).
    pages = [p for p in (tmp_path / "site").rglob("*") if p.suffix in (".html", ".css", ".js")]
    assert len(pages) > 20
    for page in pages:
        text = page.read_text(encoding="utf-8", errors="replace")
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, page
    assert "MkDocs 2.0" not in done.stderr and "end of life" not in done.stderr.lower(), done.stderr[:500]


def _blocks(language: str) -> list[tuple[str, str, str]]:
    """(page, the mark right before the block or "", the block) for every block of `language` on the site."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(rf"```{language}\n(.*?)\n```", text, re.DOTALL):
            mark = re.search(r"(<!-- .*? -->)\n$", text[: match.start()])
            found.append((page.name, mark.group(1) if mark else "", match.group(1)))
    return found


def _tests() -> dict[str, str]:
    """Every test of the suite by `tests/FILE.py::NAME`, with its file's text."""
    found = {}
    for path in (ROOT / "tests").glob("test_*.py"):
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r"^def (test_\w+)", text, flags=re.MULTILINE):
            found[f"tests/{path.name}::{name}"] = text
    return found


def _unmarked(language: str) -> list[tuple[str, str]]:
    return [(page, block) for page, mark, block in _blocks(language) if not mark]


def test_every_marked_block_says_why_or_names_the_test_that_runs_it():
    """A block is run here, or marked: "run by tests/FILE.py::TEST" (a test that exists and reads that page), or
    "not run by the docs test: REASON" (what the machine lacks: a server, a dataset, hours)."""
    tests = _tests()
    blocks = _blocks("bash") + _blocks("python")
    assert any(mark.startswith("<!-- run by") for _, mark, _ in blocks) and _unmarked("bash")
    for page, mark, block in blocks:
        if not mark:
            continue
        runner = RUN_BY.fullmatch(mark)
        if runner:
            assert runner.group(1) in tests, f"{page}: {runner.group(1)} is no test of the suite"
            assert f'"{page}"' in tests[runner.group(1)], f"{page}: {runner.group(1)} does not read this page"
        else:
            assert NOT_RUN.fullmatch(mark), f"{page}: the mark before {block[:60]!r} says neither why nor what runs it"


@pytest.mark.parametrize("page, block", _unmarked("python"), ids=lambda v: v if v.endswith(".md") else "")
def test_every_unmarked_python_block_runs_in_an_empty_folder(page, block, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(block, {})
    assert capsys.readouterr().out.strip()  # each block prints what it shows


@pytest.mark.parametrize("page, block", _unmarked("bash"), ids=lambda v: v if v.endswith(".md") else "")
def test_every_unmarked_shell_block_runs_in_an_empty_folder(page, block, tmp_path):
    """As written, with the installed `rawreact` first on the PATH; it exits 0 and prints what it shows."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-ec", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{page}: {done.stderr[-2000:]}"
    assert done.stdout.strip() and "Traceback" not in done.stderr


# What every code block on a page hides: text past its right edge (it scrolls), or under the copy button.
_HIDDEN = """
[...document.querySelectorAll('pre > code')].map(code => {
  const button = code.parentElement.querySelector('button.md-clipboard');
  const room = button ? code.getBoundingClientRect().right - button.getBoundingClientRect().left : 0;
  const padding = parseFloat(getComputedStyle(code).paddingRight);
  return {text: code.innerText.slice(0, 60), scrolls: code.scrollWidth > code.clientWidth + 1,
          covered: button !== null && padding < room};
}).filter(found => found.scrolls || found.covered)
"""


# The tables the site scrolls sideways (Material wraps each in a scrolling box): text past the page's column is hidden.
_WIDE_TABLES = """
Array.from(document.querySelectorAll('.md-typeset__scrollwrap'))
  .filter(wrap => wrap.scrollWidth > wrap.clientWidth + 1)
  .map(wrap => ({table: wrap.querySelector('table').rows[0].innerText.slice(0, 60), scrolls: true}))
"""


@pytest.mark.parametrize("width", [1400, 1000])
def test_no_code_block_of_the_site_hides_text_in_chromium(tmp_path, width):
    """Issue 60 item 6: at 1,400 and 1,000 px, no code block is cut at its right edge (a command's end, a usage
    line) nor has text under its copy button, and no table scrolls sideways, on the pages the newcomer found clipped
    and the pages of ScienceWorld's, LATS's and Ray's tables."""
    from browser import Browser, find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.fail("no Chromium to check the site in; install Debian's chromium package")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-d", str(site)], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    browser = Browser(binary, width=width)
    try:
        hidden = {}
        for page in (
            "getting-started",
            "games",
            "reference/commands",
            "reference/python",
            "environments",
            "lats",
            "paper",
            "benchmarks",
            "ray",
            "shards",
        ):
            browser.open(site / page / "index.html")
            found = browser.evaluate(_HIDDEN) + browser.evaluate(_WIDE_TABLES)
            if found:
                hidden[page] = found[:3]
    finally:
        browser.close()
    assert hidden == {}


# Each code line the page wraps: where its first visible character starts, and where its continuations start.
_WRAPPED = """
[...document.querySelectorAll('pre > code')].flatMap(code => {
  const copied = code.innerText === code.textContent;  // what a reader selects and the copy button copies
  return [...code.querySelectorAll('.line')].map(line => {
    const text = line.firstChild, indent = line.textContent.length - line.textContent.trimStart().length;
    const range = document.createRange();
    range.selectNodeContents(text);
    const rows = [...range.getClientRects()];
    range.setStart(text, indent); range.setEnd(text, indent + 1);
    const first = range.getBoundingClientRect();
    const later = rows.filter(row => row.top > rows[0].top + 1);
    return {text: line.textContent.slice(0, 60), copied, wrapped: later.length > 0, start: first.left,
            continued: later.length ? Math.min(...later.map(row => row.left)) : null};
  });
})
"""


def test_a_wrapped_code_line_goes_on_under_its_own_text_in_chromium(tmp_path):
    """Issue 70 item 8: at 1,000 px, where a code line is too long and wraps, each continuation starts to the right
    of the line's first character (its indentation kept, not column 0), on every page; and the block's text, as
    selected or copied, is the text the page's Markdown holds."""
    import runpy

    from browser import Browser, find_chromium

    lines_as_spans = runpy.run_path(str(ROOT / "scripts" / "mkdocs_hooks.py"))["lines_as_spans"]
    html = '<pre><code class="language-py">call(\n    a=1,\n\n  &lt;b&gt;)</code></pre>'
    spans = lines_as_spans(html)
    assert '<span class="line" style="--indent:4">    a=1,</span>' in spans
    assert re.sub(r"</?span[^>]*>", "", spans) == html
    binary = find_chromium()
    if binary is None:
        pytest.fail("no Chromium to check the site in; install Debian's chromium package")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-d", str(site)], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    browser = Browser(binary, width=1000)
    wrapped, wrong = 0, {}
    try:
        for page in sorted(site.rglob("index.html")):
            browser.open(page)
            lines = browser.evaluate(_WRAPPED)
            wrapped += sum(line["wrapped"] for line in lines)
            bad = [
                line for line in lines if not line["copied"] or (line["wrapped"] and line["continued"] <= line["start"])
            ]
            if bad:
                wrong[str(page.relative_to(site))] = bad[:2]
    finally:
        browser.close()
    assert wrong == {}
    assert wrapped >= 10  # the check saw wrapped lines (47 blocks had some at 1,000 px when the issue was filed)


def test_the_benchmark_charts_are_drawn_from_the_kept_results(tmp_path):
    """Issue 59: the benchmarks page's charts are what scripts/charts.py draws from the benchmarks' own output in
    benchmarks/results/, and each bar says the figure its results give."""
    import json
    import statistics

    done = subprocess.run([sys.executable, "scripts/charts.py", "--out", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in CHARTS:
        assert (tmp_path / name).read_text() == (DOCS / "img" / name).read_text(), f"run scripts/charts.py ({name})"
        assert f"img/{name}" in (DOCS / "benchmarks.md").read_text()
    rows = json.loads((ROOT / "benchmarks/results/peer.json").read_text())["rows"]
    chart = (tmp_path / "cpu-by-setting.svg").read_text()
    plain = statistics.median(r["cpu"] for r in rows["plain"])
    for setting, got in rows.items():
        cpu = statistics.median(r["cpu"] for r in got)
        said = f"{cpu:.2f} CPU s" + ("" if setting == "plain" else f", {plain / cpu:.2f}x fewer than plain")
        assert said in chart
    assert chart.count("<rect ") == len(rows) + 1  # a bar a setting, and the background
    # Reflexion's figure: a dot a trial at the share the ledger's outcomes give, each item at its last trial so far
    ledger = [json.loads(line) for line in (ROOT / "benchmarks/results/hotpotqa-qwen.kept.jsonl").open()]
    items = {e["id"]: e["trials"] for e in ledger if e.get("row") == "reflexion"}
    chart = (tmp_path / "reflexion-by-trial.svg").read_text()
    assert chart.count("<circle ") == 5 and f"{len(items)} shared HotpotQA questions" in chart
    for trial in range(1, 6):
        solved = sum(t[min(trial, len(t)) - 1]["em"] for t in items.values())
        assert f">{solved / len(items):.3f}</text>" in chart, trial


def test_the_benchmark_charts_show_every_word_in_chromium(tmp_path):
    """Each chart parses (a broken SVG shows Chromium's error page instead) and no text runs past its edge."""
    from browser import Browser, find_chromium

    binary = find_chromium()
    if binary is None:
        pytest.fail("no Chromium to look at the charts in; install Debian's chromium package")
    browser = Browser(binary, width=900)
    try:
        for name in CHARTS:
            browser.open(DOCS / "img" / name)
            found = browser.evaluate("""(() => {
              const svg = document.documentElement;
              if (svg.tagName !== 'svg') return {error: document.body ? document.body.innerText.slice(0, 200) : '?'};
              const width = svg.viewBox.baseVal.width, height = svg.viewBox.baseVal.height;
              const out = Array.from(svg.querySelectorAll('text')).map(t => t.getBBox())
                .filter(b => b.x < 0 || b.x + b.width > width || b.y < 0 || b.y + b.height > height).length;
              return {texts: svg.querySelectorAll('text').length, outside: out};
            })()""")
            assert "error" not in found and found["texts"] >= 6 and found["outside"] == 0, (name, found)
    finally:
        browser.close()
