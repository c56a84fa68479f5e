"""Models from the Hugging Face Hub (`hf:ORG/REPO[@REVISION][:FILE|:TAG]`), through the real
`huggingface_hub` client. The Hub itself is not reachable from the machines this project is tested on,
so the client talks to a stand-in on loopback (`servers.StandInHub`, through HF_ENDPOINT) that serves
the embedded Gemma model's real file: the run below downloads it, caches it and answers with it."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
from servers import StandInHub

from rawreact.config.files import manifest_settings
from rawreact.config.settings import Settings
from rawreact.core.errors import ModelError
from rawreact.models import hub, model_path

pytest.importorskip("huggingface_hub")  # a test dependency: pip install -e '.[test]'

RAWREACT = [sys.executable, "-m", "rawreact"]
REPO = "stand-in/gemma-3-270m-GGUF"
SPEC = f"hf:{REPO}:Q4_K_M"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    other = tmp_path_factory.mktemp("files") / "other.gguf"
    other.write_bytes(b"GGUF not a model")
    server = StandInHub(
        {
            REPO: {
                "gemma-3-270m-Q4_K_M.gguf": str(model_path("gemma3-270m")),
                "gemma-3-270m-Q8_0.gguf": str(other),
                "README.md": str(other),
            },
            "stand-in/split-GGUF": {
                "big-Q2_K-00001-of-00002.gguf": str(other),
                "big-Q2_K-00002-of-00002.gguf": str(other),
            },
        }
    )
    yield server
    server.close()


def _run(args, home, endpoint, **env):
    environment = {**os.environ, "HF_HOME": str(home), "HF_ENDPOINT": endpoint, **env}
    if "HF_HUB_OFFLINE" not in env:
        environment.pop("HF_HUB_OFFLINE", None)
    return subprocess.run([*RAWREACT, *args], capture_output=True, text=True, env=environment, timeout=600)


def test_a_run_downloads_the_file_once_into_the_hub_cache_and_runs_offline_from_it(stand_in, tmp_path):
    """Issue 29 item 14: a real episode on `hf:ORG/REPO:TAG`, then the same spec with the Hub gone."""
    home = tmp_path / "hf"
    first = ["run", "--model", SPEC, "--limit", "1", "-k", "1", "--max-steps", "2", "--out", tmp_path / "a.jsonl", "-q"]
    done = _run(first, home, stand_in.url)
    assert done.returncode == 0, done.stderr
    cached = home / "hub" / f"models--{REPO.replace('/', '--')}" / "snapshots" / StandInHub.COMMIT
    assert [p.name for p in cached.iterdir()] == ["gemma-3-270m-Q4_K_M.gguf"]  # the tagged file, no other
    digest = hashlib.sha256(model_path("gemma3-270m").read_bytes()).hexdigest()
    manifest = json.loads((tmp_path / "a.jsonl.manifest.json").read_text())
    assert manifest["config"]["model"] == SPEC and manifest["config"]["model_sha256"] == digest
    record = json.loads((tmp_path / "a.jsonl").read_text().splitlines()[0])
    assert record["trajectory"]["steps"] and record["tokens"]["completion"] > 0  # the real model wrote them
    downloads = [p for p in stand_in.requests if "/resolve/" in p]
    # The Hub gone (nothing listens at its address), and told to stay offline: the cache serves the same file.
    gone = "http://127.0.0.1:9"
    for env in ({}, {"HF_HUB_OFFLINE": "1"}):
        out = tmp_path / f"offline{len(env)}.jsonl"
        done = _run(
            ["run", "--model", SPEC, "--limit", "1", "-k", "1", "--max-steps", "1", "--out", out, "-q"],
            home,
            gone,
            **env,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(out.with_name(out.name + ".manifest.json").read_text())["config"]["model_sha256"] == digest
    assert [p for p in stand_in.requests if "/resolve/" in p] == downloads  # nothing downloaded again


def test_hub_specs_that_cannot_be_served_are_one_clear_line_each(stand_in, tmp_path):
    home = tmp_path / "hf"
    cases = [
        ("hf:stand-in/nope:Q4_K_M", stand_in.url, "has no repository stand-in/nope"),
        (f"hf:{REPO}:Q5_K_M", stand_in.url, "no .gguf files of stand-in/gemma-3-270m-GGUF match; name one of them"),
        (f"hf:{REPO}", stand_in.url, "several .gguf files of stand-in/gemma-3-270m-GGUF match; add :FILE or :TAG"),
        (f"hf:{REPO}@v9:Q4_K_M", stand_in.url, "has no revision 'v9'"),
        ("hf:gemma", stand_in.url, "name a Hugging Face repository as hf:ORG/REPO"),
        (SPEC, "http://127.0.0.1:9", "could not be reached, and the Hugging Face cache"),
    ]
    for spec, endpoint, message in cases:
        done = _run(["run", "--model", spec, "--limit", "1", "--out", tmp_path / "x.jsonl"], home, endpoint)
        assert done.returncode != 0 and message in done.stderr, (spec, done.stderr)
        assert "Traceback" not in done.stderr and not (tmp_path / "x.jsonl").exists()
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        if "match" in message:  # the choices are listed
            assert "(it holds gemma-3-270m-Q4_K_M.gguf, gemma-3-270m-Q8_0.gguf)" in done.stderr


def test_a_split_model_is_downloaded_whole_and_read_from_its_first_part(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_ENDPOINT", stand_in.url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))  # read once, at import
    monkeypatch.setattr(hub, "_RESOLVED", {})
    first = hub.hub_file("hf:stand-in/split-GGUF:Q2_K")
    assert first.name == "big-Q2_K-00001-of-00002.gguf"
    assert sorted(p.name for p in first.parent.iterdir()) == [first.name, "big-Q2_K-00002-of-00002.gguf"]


def test_the_spec_is_read_and_files_are_chosen_as_documented():
    assert hub.parse_hub_spec("hf:org/repo") == ("org/repo", None, None)
    assert hub.parse_hub_spec("hf:org/repo@v1.0:Q8_0") == ("org/repo", "v1.0", "Q8_0")
    assert hub.parse_hub_spec("hf:org/repo:sub/model-q4_k_m.gguf") == ("org/repo", None, "sub/model-q4_k_m.gguf")
    for bad in ("hf:repo", "hf:a/b/c", "hf:/repo", "hf:org/ rep"):
        with pytest.raises(ModelError, match="name a Hugging Face repository"):
            hub.parse_hub_spec(bad)
    files = ["m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "m-Q8_0.gguf", "mmproj-F16.gguf", "README.md"]
    assert hub._chosen("s", "r", files, "q8_0") == ["m-Q8_0.gguf"]  # tags match in any case
    assert hub._chosen("s", "r", files, "m-Q4_K_S.gguf") == ["m-Q4_K_S.gguf"]
    assert hub._chosen("s", "r", files, "*K_M*") == ["m-Q4_K_M.gguf"]
    for part in ("Q8", "Q4_K", "K_M"):  # a tag is a whole part of the name, not any piece of it
        with pytest.raises(ModelError, match="no .gguf files of r match"):
            hub._chosen("s", "r", files, part)
    with pytest.raises(ModelError, match=r"several .gguf files of r match; name one of them \(it holds a-Q8_0"):
        hub._chosen("s", "r", ["a-Q8_0.gguf", "b-Q8_0.gguf"], "Q8_0")
    with pytest.raises(ModelError, match="r holds no .gguf file"):
        hub._chosen("s", "r", ["README.md"], None)
    assert hub._chosen("s", "r", ["only-F16.gguf", "a.txt"], None) == ["only-F16.gguf"]


def test_a_manifest_keeps_an_hf_spec_as_it_is():
    assert manifest_settings(Settings(model=SPEC.replace("Q4_K_M", "gemma.gguf")))["model"] == f"hf:{REPO}:gemma.gguf"
