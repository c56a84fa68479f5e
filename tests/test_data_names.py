"""Benchmarks by name (`rawreact run hotpotqa-dev-distractor`, `rawreact data`): downloaded once into the data
cache from a server on loopback that serves files the tests make, checked against a pinned SHA-256, refused when
the bytes differ, and offline one line saying which file to fetch from where and where to put it. No test here
reaches the internet."""

import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest

from rawreact.cli.app import main
from rawreact.core.errors import DataError
from rawreact.tasks import named


class _Files(http.server.SimpleHTTPRequestHandler):
    served: list[str]

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.served.append(self.path)
        super().do_GET()


@pytest.fixture
def server(tmp_path):
    """A file server on 127.0.0.1 over tmp_path/served; yields (base URL, folder, the paths it was asked for)."""
    folder = tmp_path / "served"
    folder.mkdir()
    served: list[str] = []
    handler = type("Handler", (_Files,), {"served": served})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **k: handler(*a, directory=str(folder), **k))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", folder, served
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cache" / "rawreact" / "data"


def _hotpot(question: str, answer: str) -> bytes:
    row = {"_id": "h1", "question": question, "answer": answer, "type": "bridge", "level": "easy",
           "supporting_facts": [["Dallow", 0]],
           "context": [["Dallow", ["Dallow is a town founded by Petra Lind.", "It lies on the Tam."]]]}  # fmt: skip
    return json.dumps([row]).encode()


def _pin(monkeypatch, name: str, content: bytes, file: str = "small_dev.json") -> named.Named:
    """A catalog entry for a small file the test serves, pinned to its bytes."""
    entry = named.Named(name, "a small test set", f"http://example.invalid/x/{file}", len(content),
                        hashlib.sha256(content).hexdigest())  # fmt: skip
    monkeypatch.setitem(named.CATALOG, name, entry)
    return entry


def test_a_named_benchmark_downloads_once_is_checked_and_runs(server, cache, tmp_path, monkeypatch, capsys):
    base, folder, served = server
    content = _hotpot("Who founded Dallow?", "Petra Lind")
    (folder / "small_dev.json").write_bytes(content)
    _pin(monkeypatch, "small-dev", content)
    monkeypatch.setenv(named.MIRROR, base)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([" It says so.\nAction 1: Finish[Petra Lind]"] * 2))
    out = tmp_path / "run.jsonl"
    code = main(["run", "small-dev", "--model", f"scripted:{script}", "--out", str(out), "-q"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"downloading small-dev (0.0 MB) from {base}/small_dev.json into {cache / 'small_dev.json'}" in captured.err
    assert (cache / "small_dev.json").read_bytes() == content
    assert list(cache.iterdir()) == [cache / "small_dev.json"]  # no partial file left beside it
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert (record["prediction"], record["em"]) == ("Petra Lind", 1.0)
    manifest = json.loads(out.with_name("run.jsonl.manifest.json").read_text())
    assert manifest["config"]["data_sha256"] == hashlib.sha256(content).hexdigest()
    assert manifest["command"][:3] == ["rawreact", "run", "small-dev"]
    # A second run reads the cached file: the server is not asked again.
    again = tmp_path / "again.jsonl"
    assert main(["run", "small-dev", "--model", f"scripted:{script}", "--out", str(again), "-q"]) == 0
    assert served == ["/small_dev.json"]
    assert "downloading" not in capsys.readouterr().err


def test_bytes_that_are_not_the_pinned_ones_are_refused_and_nothing_is_kept(server, cache, monkeypatch, capsys):
    base, folder, _ = server
    pinned = _hotpot("Who founded Dallow?", "Petra Lind")
    _pin(monkeypatch, "small-dev", pinned)
    monkeypatch.setenv(named.MIRROR, base)
    # The same size, other bytes (one letter changed): the SHA-256 tells them apart.
    (folder / "small_dev.json").write_bytes(pinned.replace(b"Petra", b"Petru"))
    assert main(["run", "small-dev", "--model", "scripted:none.json"]) == 2
    err = capsys.readouterr().err
    assert f"small-dev: {base}/small_dev.json sent {len(pinned):,} bytes of " in err
    assert f"not the {len(pinned):,} bytes of SHA-256 {hashlib.sha256(pinned).hexdigest()}" in err
    assert "nothing was kept" in err and "Traceback" not in err
    assert not cache.exists() or list(cache.iterdir()) == []
    # A larger file is cut off once it passes the pinned size, not downloaded whole.
    (folder / "small_dev.json").write_bytes(pinned + b" " * (3 << 20))
    with pytest.raises(DataError, match=f"sent more than {len(pinned):,} bytes"):
        named.path_of("small-dev")
    assert list(cache.iterdir()) == []


def test_the_real_pins_refuse_a_file_that_is_not_hotpotqa(server, cache, monkeypatch):
    """The shipped catalog entry itself, with a mirror serving a stand-in under HotpotQA's file name."""
    base, folder, served = server
    (folder / "hotpot_dev_distractor_v1.json").write_bytes(_hotpot("Who?", "Nobody"))
    monkeypatch.setenv(named.MIRROR, base + "/")
    with pytest.raises(
        DataError, match="bytes of SHA-256 4e9ecb5c8d3b719f624d66b60f8d56bf227f03914f5f0753d6fa1b359d7104ea"
    ):
        named.path_of("hotpot_qa")  # the alias a user of Hugging Face's datasets types
    assert served == ["/hotpot_dev_distractor_v1.json"]


def test_offline_one_line_names_the_file_its_address_and_its_place(server, cache, monkeypatch, capsys):
    base, _, _ = server
    monkeypatch.setenv(named.MIRROR, base.rsplit(":", 1)[0] + ":9")  # the discard port: nothing listens on loopback
    assert main(["run", "hotpotqa-dev-distractor", "--model", "scripted:none.json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("rawreact: error: hotpotqa-dev-distractor: could not download http://127.0.0.1:9/")
    assert "fetch http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json (46,320,117 bytes" in err
    assert f"and put it at {cache / 'hotpot_dev_distractor_v1.json'}, or give the file's path" in err
    # A 404 from the mirror reads the same, with the server's reason.
    monkeypatch.setenv(named.MIRROR, base)
    with pytest.raises(
        DataError, match=r"\(HTTP 404 File not found\); fetch https://fever.ai/download/fever/paper_dev"
    ):
        named.path_of("fever")


def test_a_file_put_in_place_by_hand_is_checked_as_a_download_is(cache, monkeypatch):
    content = _hotpot("Who founded Dallow?", "Petra Lind")
    _pin(monkeypatch, "small-dev", content)
    cache.mkdir(parents=True)
    (cache / "small_dev.json").write_bytes(content)
    assert named.path_of("small-dev") == cache / "small_dev.json"  # no server: the file there is taken
    (cache / "small_dev.json").write_bytes(content + b"\n")
    with pytest.raises(DataError, match="delete it and run again to download it"):
        named.path_of("small-dev")


def test_a_file_of_that_name_wins_and_a_mistyped_name_is_pointed_at(cache, capsys):
    Path("demo").write_text(json.dumps({"passages": {"A": "a."}, "questions": [{"question": "q?", "answer": "a"}]}))
    assert not named.is_name("demo") and named.is_name("fever")
    assert main(["run", "hotpot-qa", "--model", "scripted:none.json"]) == 2
    assert (
        "hotpot-qa: cannot read the question file: No such file or directory; did you mean the benchmark "
        "hotpotqa-dev-distractor? `rawreact data` lists" in capsys.readouterr().err
    )
    assert main(["data", "hotpot-qa"]) == 2
    assert "hotpot-qa: not a benchmark rawreact knows by name; `rawreact data` lists them" in capsys.readouterr().err


def test_rawreact_data_lists_the_names_and_what_is_here(server, cache, monkeypatch, capsys):
    assert main(["data"]) == 0
    listing = capsys.readouterr().out
    for name in ("demo", "hotpotqa-dev-distractor", "hotpotqa-dev-fullwiki", "fever-paper-dev", "scienceworld"):
        assert f"\n{name}  (" in listing
    assert "46.3 MB to download from http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json" in listing
    assert f"files are kept in {cache}" in listing
    base, folder, _ = server
    content = _hotpot("Who founded Dallow?", "Petra Lind")
    (folder / "small_dev.json").write_bytes(content)
    _pin(monkeypatch, "small-dev", content)
    monkeypatch.setenv(named.MIRROR, base)
    assert main(["data", "small-dev"]) == 0
    assert capsys.readouterr().out == f"small-dev: {cache / 'small_dev.json'}\n"
    assert main(["data"]) == 0
    assert "\nsmall-dev  (downloaded)\n" in capsys.readouterr().out
