"""The passage store: every input format, written here; titles that repeat, differ in case or are not
ASCII; the same observations as the in-memory collection; builds that fail or are killed leave
nothing that looks complete; runs and comparisons over a store."""

import bz2
import gzip
import hashlib
import io
import json
import signal
import sqlite3
import subprocess
import sys
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rawreact import load_collection
from rawreact.core.actions import Action
from rawreact.core.errors import DataError, GrammarError
from rawreact.core.resources import resource
from rawreact.environments.build import build_store
from rawreact.environments.env import PassageEnv
from rawreact.environments.reference import ReferenceEnv
from rawreact.environments.store import PassageStore
from rawreact.experiments.compare import compare
from rawreact.experiments.variants import Variant
from rawreact.runs.records import read_run
from rawreact.tasks.corpus import read_sources
from rawreact.tasks.loading import open_passages


def _lines(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def _build(tmp_path, *sources, name="store.sqlite") -> PassageStore:
    build_store(read_sources(list(sources)), tmp_path / name)
    return PassageStore(tmp_path / name)


HOTPOT_LINES = [
    {
        "id": "1",
        "url": "u",
        "title": "Ostrel",
        "text": ["Ostrel is a city.", " It lies on the Tam."],
        "text_with_links": [],
    },
    {"id": "2", "url": "u", "title": "Tam (river)", "text": ["The Tam is a river.", " It rises in the hills."]},
]


def test_hotpotqa_fullwiki_as_distributed_its_folder_and_its_files(tmp_path):
    shard = bz2.compress(_lines(HOTPOT_LINES))
    archive = tmp_path / "enwiki-abstracts.tar.bz2"
    with tarfile.open(archive, "w:bz2") as tar:
        for name in ("enwiki/AA/wiki_00.bz2", "enwiki/AB/wiki_00.bz2"):
            info = tarfile.TarInfo(name)
            info.size = len(shard)
            tar.addfile(info, io.BytesIO(shard))
    store = _build(tmp_path, archive)
    assert len(store) == 2 and store.info["duplicates"] == 2  # the second shard repeats the first
    assert store.sentences("ostrel") == ["Ostrel is a city.", "It lies on the Tam."]
    (source,) = store.info["sources"]
    assert source["format"] == "hotpotqa fullwiki" and source["read"] == 4
    assert source["sha256"] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert source["size"] == archive.stat().st_size

    folder = tmp_path / "unpacked" / "AA"
    folder.mkdir(parents=True)
    (folder / "wiki_00.bz2").write_bytes(shard)
    (folder / "wiki_01.bz2").write_bytes(bz2.compress(_lines([{"title": "Calvora", "text": ["A country."]}])))
    store = _build(tmp_path, tmp_path / "unpacked", name="folder.sqlite")
    assert len(store) == 3 and [s["path"].rsplit("/", 1)[1] for s in store.info["sources"]] == [
        "wiki_00.bz2",
        "wiki_01.bz2",
    ]
    assert store.sentences("Tam (river)") == ["The Tam is a river.", "It rises in the hills."]


def test_fever_wiki_pages_generic_lines_and_question_files(tmp_path):
    fever = tmp_path / "wiki-pages"
    fever.mkdir()
    (fever / "wiki-001.jsonl").write_bytes(
        _lines(
            [
                {"id": "", "text": "", "lines": ""},
                {
                    "id": "Ostrel_-LRB-city-RRB-",
                    "text": "t",
                    "lines": "0\tOstrel is a city , on the Tam .\tTam\n1\t\n2\tIt has `` two '' bridges .",
                },
            ]
        )
    )
    generic = tmp_path / "pages.jsonl.gz"
    generic.write_bytes(
        gzip.compress(
            _lines(
                [
                    {"title": "Calvora", "text": "Calvora is a country. Its capital is Ostrel."},
                    {"title": "Tam", "sentences": ["One.", "Two."]},
                ]
            )
        )
    )
    store = _build(tmp_path, fever, generic, resource("envs", "demo.json"))
    assert store.sentences("OSTREL (CITY)") == ["Ostrel is a city, on the Tam.", 'It has "two" bridges.']
    assert store.sentences("Calvora") == ["Calvora is a country.", "Its capital is Ostrel."]
    assert store.sentences("tam") == ["One.", "Two."]
    formats = [s["format"] for s in store.info["sources"]]
    assert formats == ["fever wiki-pages", "title + sentences + title + text", "collection (envs)"]
    assert store.info["sources"][0]["skipped"] == 1  # FEVER's first line: no id, no text
    demo = load_collection()
    assert len(store) == 3 + len(demo.passages) - 0  # the demo's titles are new here
    assert (
        store.info["content_sha256"]
        == _build(tmp_path, fever, generic, resource("envs", "demo.json"), name="again.sqlite").sha256
    )


def test_repeated_titles_case_variants_and_unicode(tmp_path):
    pages = tmp_path / "pages.jsonl"
    pages.write_bytes(
        _lines(
            [
                {"title": "Apple", "sentences": ["The first apple."]},
                {"title": "Apple", "sentences": ["A repeat, dropped."]},
                {"title": "APPLE", "sentences": ["Shouting apple, kept but opened second."]},
                {"title": "Zürich", "sentences": ["A city on a lake."]},
                {"title": "東京", "sentences": ["The capital of Japan."]},
                {"title": "Ålesund Church", "sentences": ["A church."]},
                {"title": "", "sentences": ["No title: skipped."]},
                {"title": "Empty", "sentences": ["  "]},
            ]
        )
    )
    store = _build(tmp_path, pages)
    # A page of white space is kept, as memory keeps it (its search opens an empty page); no title is skipped.
    assert len(store) == 6 and store.info["duplicates"] == 1 and store.info["sources"][0]["skipped"] == 1
    assert store.passage("Empty") == ["  "] and store.sentences("Empty") == []
    assert store.sentences("apple") == ["The first apple."]  # the first of the case variants
    assert sorted(store.similar("Apple pie")) == ["APPLE", "Apple"]  # both variants listed, as in memory
    assert store.sentences("ZÜRICH") == ["A city on a lake."] and store.sentences("東京") == ["The capital of Japan."]
    assert store.similar("Zurich")[0] == "Zürich"  # diacritics do not count in the full-text match
    assert store.similar("Zürich lake")[0] == store.similar("ZURICH LAKE")[0] == "Zürich"
    assert store.similar("alesund")[0] == "Ålesund Church"
    assert store.similar("Church of Alesund")[0] == "Ålesund Church"
    assert store.similar("Zur") == ["Zürich"] and store.similar("Zurichers") == ["Zürich"]  # how a word begins
    assert store.similar("Nothing like it") == [] and store.similar("...") == []


def test_the_store_answers_as_the_collection_does(tmp_path):
    """Every search and lookup over the demo's passages: the same observation from memory and from the store."""
    demo = load_collection()
    store = _build(tmp_path, resource("envs", "demo.json"))
    for n_first in (1, 2, 5):
        memory, stored = PassageEnv(demo.passages, n_first), PassageEnv(store, n_first)
        reference_memory, reference_stored = demo.env(loop="reference", n_first=n_first), ReferenceEnv(store, n_first)
        for title in demo.passages:
            for action in (f"search[{title.upper()}]", "lookup[the]", "lookup[the]", "lookup[of]"):
                assert memory.step(action) == stored.step(action), action
                assert reference_memory.step(action) == reference_stored.step(action), action
            # A miss lists titles sharing a word with the search: fewer than the in-memory scan, same best
            assert stored.similar(f"{title}x") and stored.similar(f"{title} x")[0] == memory.similar(f"{title} x")[0]
    miss, _ = stored.step("search[Orlo Bridge]")
    assert miss.startswith("Could not find Orlo Bridge. Similar: [") and "'Orlo" in miss


def test_the_full_text_ranking_finds_titles_among_many(tmp_path):
    rows = [{"title": f"Filler {i} (album)", "sentences": ["x."]} for i in range(3000)]
    rows += [
        {"title": "Kiss and Tell (1945 film)", "sentences": ["A film."]},
        {"title": "Meet Corliss Archer", "sentences": ["A show."]},
    ]
    pages = tmp_path / "pages.jsonl"
    pages.write_bytes(_lines(rows))
    store = _build(tmp_path, pages)
    assert store.similar("Corliss Archer")[0] == "Meet Corliss Archer"
    assert store.similar("Kiss and Tell film")[0] == "Kiss and Tell (1945 film)"
    assert store.similar("album 17")[0] == "Filler 17 (album)"  # "album" is in 3,000 titles, 17 narrows it
    assert len(store.similar("album")) == 5


def test_bad_sources_are_clear_errors_and_leave_nothing(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"title": "A", "text": "a."}\n{"title": "B", "text": "b."}\n{oops\n')
    out = tmp_path / "store.sqlite"
    with pytest.raises(DataError, match=r"bad.jsonl line 3: not a JSON object"):
        build_store(read_sources([bad]), out)
    assert list(tmp_path.iterdir()) == [bad]
    notitle = tmp_path / "notitle.jsonl"
    notitle.write_text('{"name": "A"}\n')
    with pytest.raises(DataError, match=r"notitle.jsonl line 1: no 'title'"):
        build_store(read_sources([notitle]), out)
    broken = tmp_path / "cut.jsonl.bz2"
    broken.write_bytes(bz2.compress(b'{"title": "A", "text": "a."}\n' * 100)[:60])
    with pytest.raises(DataError, match="cut.jsonl.bz2: cannot read it to the end"):
        build_store(read_sources([broken]), out)
    with pytest.raises(DataError, match="no such file or folder"):
        list(read_sources([tmp_path / "missing"]))
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_interrupted_or_killed_build_never_looks_complete(tmp_path):
    pages = tmp_path / "pages.jsonl"
    pages.write_bytes(_lines([{"title": f"T{i}", "sentences": ["s."]} for i in range(20_000)]))
    out = tmp_path / "store.sqlite"

    def interrupt(count):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_store(read_sources([pages]), out, on_pages=interrupt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pages.jsonl"]
    # SIGKILL halfway: the pages so far are in a temporary file that no reader takes for a store
    script = (
        "import sys, time\nfrom rawreact.tasks.corpus import read_sources\n"
        "from rawreact.environments.build import build_store\n"
        "def slow(n):\n    print('batch', flush=True)\n    time.sleep(30)\n"
        f"build_store(read_sources([{str(pages)!r}]), {str(out)!r}, on_pages=slow)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "batch\n"
    child.send_signal(signal.SIGKILL)
    child.wait()
    (temp,) = [p for p in tmp_path.iterdir() if p.name.startswith(".store.sqlite.building-")]
    assert not out.exists() and sqlite3.connect(temp).execute("SELECT count(*) FROM pages").fetchone()[0] < 20_000
    with pytest.raises(DataError, match="not a complete rawreact passage store"):
        PassageStore(temp)
    sqlite3.connect(tmp_path / "other.sqlite").execute("CREATE TABLE meta (name, value)").connection.commit()
    with pytest.raises(DataError, match="not a complete rawreact passage store"):
        PassageStore(tmp_path / "other.sqlite")


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "rawreact", *map(str, args)], cwd=cwd, capture_output=True, text=True)


def test_the_index_command(tmp_path):
    pages = tmp_path / "pages.jsonl"
    pages.write_text('{"title": "A", "text": "Alpha is first."}\n{"title": "A", "text": "again"}\n')
    done = _cli("index", pages, "--out", "a.sqlite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.startswith("a.sqlite: 1 page from 1 source in ") and "(1 repeated title kept once)" in done.stdout
    )
    before = (tmp_path / "a.sqlite").read_bytes()
    again = _cli("index", pages, "--out", "a.sqlite", cwd=tmp_path)
    assert again.returncode == 2 and "a.sqlite exists; give another --out, or add --force" in again.stderr
    (tmp_path / "bad.jsonl").write_text("[1]\n")
    bad = _cli("index", "bad.jsonl", "--out", "a.sqlite", "--force", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("rawreact: error: bad.jsonl row 1: ")
    assert (tmp_path / "a.sqlite").read_bytes() == before  # the old store is kept when the new one fails


def test_hotpotqa_questions_leave_their_own_paragraphs_for_the_store(tmp_path, rows):
    """The open setting: a question that brings paragraphs is still answered over the store."""
    data = tmp_path / "dev.json"
    data.write_text(json.dumps(rows[:3]))
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"title": "Far Island", "text": "Far Island lies in the north sea."}\n')
    store = tmp_path / "wiki.sqlite"
    build_store(read_sources([data, extra]), store)
    collection = load_collection(data)
    own_title = next(iter(collection.questions[0].passages))
    for loop in ("tolerant", "reference"):
        env = Variant("open", loop=loop, passages=str(store)).envs(collection)(collection.questions[0])
        assert isinstance(env.pages, PassageStore)
        assert env.step("search[Far Island]")[0].startswith("Far Island lies")
        assert not env.step(f"search[{own_title}]")[0].startswith("Could not find")  # pooled into the store
        own = Variant("own", loop=loop).envs(collection)(collection.questions[0])
        assert own.step("search[Far Island]")[0].startswith("Could not find Far Island")


def test_runs_and_comparisons_over_a_store(tmp_path):
    """Demo questions over a store of other passages plus the demo's: the manifest names the store."""
    extra = tmp_path / "extra.jsonl"
    extra.write_text('{"title": "Far Island", "text": "Far Island lies in the north sea."}\n')
    store = tmp_path / "wiki.sqlite"
    build_store(read_sources([resource("envs", "demo.json"), extra]), store)
    demo = load_collection()
    question = demo.questions[0]
    script = tmp_path / "s.json"
    steps = [" Look.\nAction 1: Search[Far Island]", f" Done.\nAction 2: Finish[{question.answer}]"]
    script.write_text(json.dumps({"questions": {question.question: steps}}))
    runs = tmp_path / "runs"
    variants = [
        Variant("own", model=f"scripted:{script}"),
        Variant("open", model=f"scripted:{script}", passages=str(store)),
    ]
    comparison = compare(None, variants, runs, limit=1)
    assert comparison.names == ["own", "open"]
    own, opened = read_run(runs / "own.jsonl"), read_run(runs / "open.jsonl")
    assert own[1][0]["trajectory"]["steps"][0]["observation"].startswith("Could not find Far Island")
    assert opened[1][0]["trajectory"]["steps"][0]["observation"] == "Far Island lies in the north sea."
    config = opened[0]["config"]
    assert config["passages"] == str(store) and config["passages_sha256"] == PassageStore(store).sha256
    assert own[0]["config"]["passages"] is None
    # the same store under another name is the same run: resume goes on
    moved = tmp_path / "moved.sqlite"
    moved.write_bytes(store.read_bytes())
    compare(None, [Variant("open", model=f"scripted:{script}", passages=str(moved))], runs, limit=1)
    with pytest.raises(GrammarError, match="--grammar titles writes every passage title"):
        Variant("t", grammar="titles", passages=str(store)).collection(demo)
    assert open_passages(resource("envs", "demo.json")).kind == "collection"


# A store keeps no page without a title or text, so every title and sentence here has some.
_TITLE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
    str.strip
)
_SENTENCE = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30).filter(str.strip)


@settings(max_examples=60)
@given(st.dictionaries(_TITLE, st.lists(_SENTENCE, min_size=1, max_size=4), min_size=1, max_size=6), st.data())
def test_any_collection_answers_the_same_from_memory_and_from_a_store(tmp_path_factory, pages, data):
    """Random titles and sentences (any Unicode, repeats in other case): every search that opens a
    page, and every lookup after it, observes the same from a store as from memory."""
    folder = tmp_path_factory.mktemp("store")
    source = folder / "pages.jsonl"
    source.write_bytes(_lines([{"title": t, "sentences": s} for t, s in pages.items()]))
    build_store(read_sources([source]), folder / "s.sqlite")
    memory, stored = PassageEnv(pages), PassageEnv(PassageStore(folder / "s.sqlite"))
    for title in pages:
        keyword = data.draw(st.text(max_size=3))
        for action in (Action("search", title), Action("lookup", keyword), Action("lookup", keyword)):
            seen = memory.step(action)
            if not (action.name == "search" and seen[0].startswith("Could not find")):
                assert stored.step(action) == seen, action
            else:
                assert stored.step(action)[0].startswith(f"Could not find {title}. Similar: ")
