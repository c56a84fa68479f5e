"""README promises that no other test checked (docs/promises.md lists each "never", "always" and
"refused" of the README with the test that shows it)."""

import json
import re
import sqlite3
from pathlib import Path

import pytest
from servers import OpenAIStub

from rawreact import DataError, ModelError, Variant, compare
from rawreact.core.resources import resource
from rawreact.environments.build import build_store
from rawreact.environments.store import PassageStore
from rawreact.models.openai import OpenAIModel
from rawreact.tasks.corpus import read_sources

ROOT = Path(__file__).resolve().parent.parent


def test_a_rebuilt_store_with_other_pages_is_refused_by_resume(tmp_path):
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"title": "Far Island", "text": "Far Island lies in the north sea."}\n')
    store = tmp_path / "wiki.sqlite"
    build_store(read_sources([resource("envs", "demo.json")]), store)
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["  Done.\nAction 1: Finish[x]"] * 4))
    variant = Variant("open", model=f"scripted:{script}", passages=str(store))
    compare(None, [variant], tmp_path / "runs", limit=1)
    build_store(read_sources([resource("envs", "demo.json"), extra]), store, replace=True)  # other pages, same path
    with pytest.raises(DataError, match="--resume would mix two different runs .*passages_sha256"):
        compare(None, [variant], tmp_path / "runs", limit=2)


def test_a_store_of_an_earlier_format_is_refused_asking_to_rebuild_it(tmp_path):
    store = tmp_path / "old.sqlite"
    build_store(read_sources([resource("envs", "demo.json")]), store)
    with sqlite3.connect(store) as db:
        db.execute("UPDATE meta SET value = '1' WHERE name = 'version'")
    with pytest.raises(DataError, match=f"{store}: store version 1, this rawreact reads 2 and 3; rebuild it"):
        PassageStore(store)


def test_a_server_of_an_unknown_family_is_refused_a_grammar_rather_than_sent_one():
    stub = OpenAIStub(owned_by="someone-else", default={"choices": [{"text": " x", "finish_reason": "stop"}]})
    try:
        model = OpenAIModel(stub.url)
        assert model.family == "other" and not model.supports_grammar
        with pytest.raises(ModelError, match="is not a llama.cpp or vLLM server, so rawreact does not know how"):
            model.complete("Q", stop=[], max_tokens=5, grammar='root ::= "x"')
        assert stub.requests == []  # nothing was sent
    finally:
        stub.close()


def test_every_promise_of_the_readme_is_listed_with_a_test_that_exists():
    """Each never/always/refused sentence of the README and of the site's pages written by hand (the generated
    reference pages repeat the options' help) is in docs/promises.md, naming tests that exist."""
    pages = [ROOT / "README.md", *(p for p in (ROOT / "docs").glob("*.md") if p.name != "promises.md")]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    listed = (ROOT / "docs" / "promises.md").read_text(encoding="utf-8")
    promises = len(re.findall(r"\b(never|always|refused|refuses)\b", text, flags=re.IGNORECASE))
    heads = ("| promise", "| ---")
    rows = [line for line in listed.splitlines() if line.startswith("| ") and not line.startswith(heads)]
    assert len(rows) >= promises, f"the pages make {promises} promises and docs/promises.md lists {len(rows)}"
    tests = {
        f"{path.name}::{name}"
        for path in (ROOT / "tests").glob("test_*.py")
        for name in re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
    }
    named = re.findall(r"`(test_\w+\.py::test_\w+)`", listed)
    assert named and not [name for name in named if name not in tests]
