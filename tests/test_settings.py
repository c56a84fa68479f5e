"""One settings value for every entry point: `Settings` checks itself, `rawreact run --config` reads
TOML and manifests, flags override a file, and a finished run reruns from its manifest."""

import json
from pathlib import Path

import pytest

import rawreact.runs.plan
from rawreact import DataError, Settings, Variant, read_run, read_settings
from rawreact.cli.app import main
from rawreact.config.files import manifest_settings
from rawreact.config.settings import KEYS, SHARED, VARIANT_KEYS

TIMES = ("seconds", "started", "finished")


def _timeless(value):
    """A record without its wall times, which no two runs share."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _records(path: Path) -> list[dict]:
    return [_timeless(r) for r in read_run(path)[1]]


def _manifest(path: Path) -> dict:
    return json.loads(Path(f"{path}.manifest.json").read_text(encoding="utf-8"))


def _script(tmp_path: Path, texts: list[str]) -> Path:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(texts), encoding="utf-8")
    return path


# The value itself.


def test_settings_check_each_value_and_name_the_key():
    assert Settings().method == "react" and Settings().sentences == 2 and Settings(loop="reference").sentences == 5
    assert Settings(temperature=1).temperature == 1.0 and isinstance(Settings(temperature=1).temperature, float)
    for bad, said in [
        ({"k": "3"}, "k='3' must be a whole number (or left out)"),
        ({"workers": 0}, "workers=0 (--workers) must be at least 1"),
        ({"shuffle": "yes"}, "shuffle='yes' must be true or false"),
        ({"samples": True}, "samples=True must be a whole number"),
        ({"method": "tot"}, "method='tot'; the methods are react, act"),
        ({"timeout": 0.0}, "timeout=0.0 (--timeout) must be a finite number of seconds above 0"),
        ({"method": "cot", "grammar": "step"}, "method cot writes none; drop the grammar"),
    ]:
        with pytest.raises(DataError) as error:
            Settings(**bad)
        assert said in str(error.value)


def test_a_variant_is_settings_with_a_name_and_shares_the_run_level_keys_with_its_comparison():
    variant = Variant("k3", k=3)
    assert isinstance(variant, Settings) and variant.settings == Settings(k=3)
    assert set(VARIANT_KEYS) | set(SHARED) == set(KEYS) and not set(VARIANT_KEYS) & set(SHARED)
    assert Settings(k=3).to_dict() == {**Settings().to_dict(), "k": 3}


# Settings files.


def test_a_toml_file_is_read_with_paths_relative_to_it(tmp_path):
    folder = tmp_path / "exp"
    folder.mkdir()
    (folder / "run.toml").write_text(
        'data = "dev.json"\nmax-steps = 3\nexemplars = 2\ngrammar = "off"\nmodel = "scripted:s.json"\n'
        'instruction = "nb.ipynb#instruction"\ntemperature = 1\n',
        encoding="utf-8",
    )
    assert read_settings(folder / "run.toml") == {
        "data": str(folder / "dev.json"),
        "max_steps": 3,
        "k": 2,
        "grammar": None,
        "model": f"scripted:{folder / 's.json'}",
        "instruction": f"{folder / 'nb.ipynb'}#instruction",
        "temperature": 1,
    }


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("max_step = 3\n", "unknown setting 'max_step' (a key); did you mean max_steps? the settings are method, loop"),
        ("[models]\nname = 'x'\n", "unknown setting 'models' (a table)"),
        ("[model]\nname = 'x'\n", "model must be a string, not a table"),
        ("max_steps = '3'\n", "max_steps='3' must be a whole number (or left out)"),
        ("max_steps = 0\n", "max_steps=0 (--max-steps) must be at least 1"),
        ("method = 'tot'\n", "method='tot'; the methods are react"),
        ("samples = [1, 2]\n", "samples must be a whole number (or left out), not a list"),
        ("max_steps = 3\nmax-steps = 4\n", "'max-steps' sets max_steps a second time"),
        ("max_steps = \n", "not valid TOML"),
        ("method = 'cot'\ngrammar = 'step'\n", "method cot writes none; drop the grammar"),
    ],
)
def test_a_bad_settings_file_is_one_line_naming_the_file_and_the_key_before_any_model_loads(
    tmp_path, capsys, monkeypatch, text, said
):
    config = tmp_path / "run.toml"
    config.write_text(text, encoding="utf-8")
    monkeypatch.setattr(rawreact.runs.plan, "load_model", lambda *a, **k: pytest.fail("a model was loaded"))
    code = main(["run", "--config", str(config), "--out", str(tmp_path / "run.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"rawreact: error: {config}: ")
    assert said in err
    assert not (tmp_path / "run.jsonl").exists()


def test_a_manifest_without_settings_is_refused_with_what_to_do(tmp_path, capsys):
    old = tmp_path / "old.jsonl.manifest.json"
    old.write_text(json.dumps({"run_file": "old.jsonl", "config": {"method": "react"}}), encoding="utf-8")
    assert main(["run", "--config", str(old)]) == 2
    assert "records no settings" in capsys.readouterr().err
    assert main(["run", "--config", str(tmp_path / "gone.jsonl")]) == 2
    assert "gone.jsonl: no manifest beside this run file (gone.jsonl.manifest.json)" in capsys.readouterr().err


# `rawreact run --config`: the same records as the same flags.


def test_a_config_file_gives_the_records_of_the_same_flags_and_flags_override_it(tmp_path, capsys):
    script = _script(tmp_path, [" I should look.\nAction 1: Search[Orlo]", " Done.\nAction 2: Finish[October]"] * 4)
    flags = ["--question", "When is the festival of Orlo held?", "--answer", "October", "--max-steps", "3"]
    flags += ["--n-first", "1", "--model", f"scripted:{script}"]
    assert main(["run", *flags, "--out", str(tmp_path / "flags.jsonl")]) == 0
    (tmp_path / "run.toml").write_text(
        'question = "When is the festival of Orlo held?"\nanswer = "October"\nmax_steps = 3\nn_first = 1\n'
        'model = "scripted:script.json"\n',
        encoding="utf-8",
    )
    assert main(["run", "--config", str(tmp_path / "run.toml"), "--out", str(tmp_path / "toml.jsonl")]) == 0
    assert _records(tmp_path / "toml.jsonl") == _records(tmp_path / "flags.jsonl")
    assert _manifest(tmp_path / "toml.jsonl")["settings"] == _manifest(tmp_path / "flags.jsonl")["settings"]
    # A flag beside the file wins over the file's value.
    args = ["run", "--config", str(tmp_path / "run.toml"), "--max-steps", "1", "--out", str(tmp_path / "one.jsonl")]
    assert main(args) == 0
    assert _manifest(tmp_path / "one.jsonl")["settings"]["max_steps"] == 1
    assert [r["ended"] for r in read_run(tmp_path / "one.jsonl")[1]] == ["max_steps"]
    capsys.readouterr()


def test_the_manifest_records_every_setting_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    recorded = manifest_settings(Settings(data="dev.json", instruction="nb.ipynb#x", model="m.gguf"))
    assert set(recorded) == set(KEYS)
    assert recorded["data"] == str(tmp_path / "dev.json") and recorded["instruction"] == f"{tmp_path / 'nb.ipynb'}#x"
    assert recorded["model"] == str(tmp_path / "m.gguf") and Settings(**recorded).data == str(tmp_path / "dev.json")


def test_a_finished_run_reruns_from_its_manifest_with_the_same_settings_and_greedy_records(tmp_path, capsys):
    """On the embedded model, one worker, greedy: the rerun's settings and records are the first run's."""
    first, again = tmp_path / "first.jsonl", tmp_path / "again.jsonl"
    flags = ["--limit", "2", "--max-steps", "3", "--workers", "1", "-k", "1", "-q"]
    assert main(["run", *flags, "--out", str(first)]) == 0
    assert main(["run", "--config", f"{first}.manifest.json", "--out", str(again), "-q"]) == 0
    assert _manifest(again)["settings"] == _manifest(first)["settings"]
    assert _manifest(again)["config"] == _manifest(first)["config"]
    assert _records(again) == _records(first) and len(_records(first)) == 2
    # The run file itself stands for its manifest, from another folder.
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert read_settings(first) == read_settings(f"{first}.manifest.json")
    capsys.readouterr()


def test_compare_takes_its_base_and_its_questions_from_a_config_file(tmp_path, capsys):
    script = _script(tmp_path, [" Done.\nAction 1: Finish[October]"] * 8)
    (tmp_path / "base.toml").write_text(
        f'model = "scripted:{script.name}"\nmax_steps = 2\nlimit = 2\n', encoding="utf-8"
    )
    out = tmp_path / "cmp"
    args = ["compare", "--config", str(tmp_path / "base.toml"), "--variant", "a=", "--variant", "b=k=1"]
    assert main([*args, "--out", str(out), "-q"]) == 0
    for name in ("a", "b"):
        manifest = _manifest(out / f"{name}.jsonl")
        assert manifest["config"]["max_steps"] == 2 and manifest["limit"] == 2
        assert manifest["config"]["model"] == f"scripted:{script}" and len(read_run(out / f"{name}.jsonl")[1]) == 2
    assert _manifest(out / "b.jsonl")["config"]["exemplars"] == 1
    # Each variant's manifest records its whole settings, so `run --config` reruns one variant alone.
    assert read_settings(out / "b.jsonl") | {} == {**read_settings(out / "a.jsonl"), "k": 1}
    assert read_settings(out / "a.jsonl")["limit"] == 2 and read_settings(out / "a.jsonl")["max_steps"] == 2
    capsys.readouterr()
