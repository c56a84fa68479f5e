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
NOT_RUN = re.compile(r"<!-- not run by the docs test: (.{10,}) -->\n```")


def test_the_reference_pages_are_what_the_code_generates():
    """An option or a setting changed without `python scripts/docs_reference.py` fails here."""
    for name, text in pages().items():
        assert (DOCS / "reference" / name).read_text(encoding="utf-8") == text, (
            f"docs/reference/{name} is stale; run python scripts/docs_reference.py"
        )


def test_the_reference_pages_name_every_command_option_and_setting():
    from rawreact.config.settings import KEYS

    commands, settings = pages()["commands.md"], pages()["settings.md"]
    for command in ("run", "compare", "report", "compare-runs", "export", "index", "games", "show", "merge"):
        assert f"## `rawreact {command}`" in commands
    assert "| `--env` |" in commands and "| `--recipe` |" in commands
    assert all(f"| `{key}` |" in settings for key in KEYS)


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


def _blocks(language: str) -> list[tuple[str, str, str]]:
    """(page, the text before the block, the block) for every block of `language` on the site's pages."""
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(rf"```{language}\n(.*?)\n```", text, re.DOTALL):
            found.append((page.name, text[: match.start()], match.group(1)))
    return found


def test_every_shell_block_says_why_it_is_not_run_here():
    """The site's shell blocks need what a test does not do (an install that compiles llama.cpp, a server, a
    dataset): each says so, and why, in a mark right before it."""
    blocks = _blocks("bash")
    assert blocks
    for page, before, block in blocks:
        assert NOT_RUN.search(before[-200:] + "```"), f"{page}: a shell block without its reason: {block[:60]!r}"


@pytest.mark.parametrize("page, before, block", _blocks("python"), ids=lambda v: v if v.endswith(".md") else "")
def test_every_python_block_runs_in_an_empty_folder(page, before, block, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(block, {})
    assert capsys.readouterr().out.strip()  # each block prints what it shows
