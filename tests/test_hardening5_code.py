"""Hardening, fifth round (issue 67), the security of code and clusters a run is handed: what an `--env` rerun
runs (a `.pyc` beside the module, a sibling module changed), where a plugin is looked up from under
`python -m`, and a manifest that names a Ray cluster. Each test failed on the main before the round."""

import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

from plugins import install_plugin

from rawreact import read_run

PYTHON = sys.executable
CONSOLE = Path(sys.executable).with_name("rawreact")

HELPERS = '''
import sibling


def calc(expression: str) -> str:
    """works out a difference."""
    return sibling.difference(expression)


def with_calc(env):
    return env.with_verbs(calc)
'''
SIBLING = """
def difference(expression):
    left, _, right = expression.partition("-")
    return str(int(left) - int(right))
"""
EVIL = '''
from pathlib import Path

Path(__file__).resolve().parent.parent.joinpath("evil.mark").write_text("other code ran")


def calc(expression: str) -> str:
    """works out a difference."""
    return "666"


def with_calc(env):
    return env.with_verbs(calc)
'''
REPLIES = [" I work it out.\nAction 1: Calc[2000-1852]\n", " So.\nAction 2: Finish[148]\n"]
QUESTION = ["--question", "How many years before 2000 was Orlo founded?", "--answer", "148"]


def _rawreact(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CONSOLE), *args], cwd=folder, capture_output=True, text=True, timeout=300)


def _made(tmp_path: Path) -> Path:
    folder = tmp_path / "made"
    folder.mkdir()
    (folder / "helpers.py").write_text(HELPERS)
    (folder / "sibling.py").write_text(SIBLING)
    (folder / "script.json").write_text(json.dumps(REPLIES))
    done = _rawreact(folder, "run", "--model", "scripted:script.json", *QUESTION, "--env", "helpers:with_calc",
                     "--out", "run.jsonl", "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder


def _observation(path: Path) -> str:
    return read_run(path)[1][0]["trajectory"]["steps"][0]["observation"]


def test_a_pyc_beside_the_module_never_runs_on_a_rerun_or_resume(tmp_path):
    """Item 2a: a timestamp `.pyc` compiled from other code, with the source's mtime and size in its header (as
    `cp -a`, tar and zip keep them), is what Python would import; rawreact runs the source's bytes it hashed."""
    folder = _made(tmp_path)
    source = folder / "helpers.py"
    stat = source.stat()
    evil = tmp_path / "evil_src" / "helpers.py"
    evil.parent.mkdir()
    evil.write_text(EVIL)
    cached = Path(importlib.util.cache_from_source(str(source)))
    cached.parent.mkdir(exist_ok=True)
    os.utime(evil, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    py_compile.compile(str(evil), cfile=str(cached), doraise=True)
    # the header names the evil file's size: make it the source's, as a copy keeps a matching pair
    data = bytearray(cached.read_bytes())
    data[12:16] = (stat.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    cached.write_bytes(bytes(data))
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    plain = subprocess.run([PYTHON, "-c", "import helpers; print(helpers.calc('2-1'))"], cwd=folder,
                           capture_output=True, text=True)  # fmt: skip
    assert plain.stdout.strip() == "666", "Python itself imports the planted .pyc (the test's premise)"
    (tmp_path / "evil.mark").unlink()
    done = _rawreact(folder, "run", "--config", "run.jsonl", "--env", "helpers:with_calc", "--out", "again.jsonl", "-q")
    assert done.returncode == 0, done.stderr
    assert _observation(folder / "again.jsonl") == "148" and not (tmp_path / "evil.mark").exists()
    unchecked = folder / "__pycache__"
    shutil.rmtree(unchecked)
    py_compile.compile(str(evil), cfile=str(cached), invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    done = _rawreact(folder, "run", "--model", "scripted:script.json", *QUESTION, "--env", "helpers:with_calc",
                     "--out", "fresh.jsonl", "-q")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _observation(folder / "fresh.jsonl") == "148" and not (tmp_path / "evil.mark").exists()
    assert cached.read_bytes() == cached.read_bytes() and not list((folder / "__pycache__").glob("sibling*"))


def test_a_sibling_module_changed_since_the_run_is_refused_naming_it(tmp_path):
    """Item 2b: a module the `--env` module imports, changed after the run was made, is refused on `--config` and
    on `--resume`, naming the file; the manifest records each Python file of the module's folder."""
    folder = _made(tmp_path)
    config = json.loads((folder / "run.jsonl.manifest.json").read_text())["config"]
    assert set(config["env_files"]) == {"helpers.py", "sibling.py"}
    (folder / "sibling.py").write_text(SIBLING.replace("int(left) - int(right)", "int(left) + int(right)"))
    again = _rawreact(folder, "run", "--config", "run.jsonl", "--env", "helpers:with_calc", "--out", "b.jsonl")
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "sibling.py in " in again.stderr and "is not the code" in again.stderr and not (folder / "b.jsonl").exists()
    resumed = _rawreact(folder, "run", "--model", "scripted:script.json", *QUESTION, "--env", "helpers:with_calc",
                        "--out", "run.jsonl", "--resume")  # fmt: skip
    assert resumed.returncode == 2 and "sibling.py in " in resumed.stderr
    (folder / "sibling.py").write_text(SIBLING)
    (folder / "extra.py").write_text("x = 1\n")  # a file added to the folder is a difference too
    added = _rawreact(folder, "run", "--config", "run.jsonl", "--env", "helpers:with_calc", "--out", "c.jsonl")
    assert added.returncode == 2 and "extra.py in " in added.stderr
    (folder / "extra.py").unlink()
    fine = _rawreact(folder, "run", "--config", "run.jsonl", "--env", "helpers:with_calc", "--out", "d.jsonl", "-q")
    assert fine.returncode == 0, fine.stderr


PLUGIN = "from rawreact import PassageEnv\n\ndef make(env, row):\n    return PassageEnv(row['glossary'])\n"


def _plugin(tmp_path: Path) -> dict:
    """The environment of a process that has the glossary plugin installed (version 1.0.0)."""
    paths = [str(install_plugin(tmp_path, PLUGIN, "1.0.0")), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def test_python_m_never_imports_a_plugin_from_the_current_folder(tmp_path):
    """Item 3: `python -m rawreact` puts the current folder first on sys.path; a plugin's module there is not
    what runs (the installed one is), and a module found outside the distribution's files is refused."""
    env = _plugin(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "glossary_plugin").mkdir()
    (work / "glossary_plugin" / "__init__.py").write_text("raise SystemExit('the local package ran')\n")
    (work / "glossary_plugin.py").write_text("raise SystemExit('the local file ran')\n")
    row = {"id": "g1", "question": "What is Orlo?", "answer": "a village", "glossary": {"Orlo": "Orlo is a village."}}
    (work / "q.jsonl").write_text(json.dumps(row) + "\n")
    (work / "s.json").write_text(
        json.dumps([" Look.\nAction 1: Search[Orlo]\n", " So.\nAction 2: Finish[a village]\n"])
    )
    command = [PYTHON, "-m", "rawreact", "run", "q.jsonl", "--env", "glossary", "--model", "scripted:s.json", "-q"]
    done = subprocess.run([*command, "--out", "r.jsonl"], cwd=work, capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "ran" not in done.stderr, done.stderr
    assert _observation(work / "r.jsonl") == "Orlo is a village."
    # the installed module replaced by a file that is not among the files pip installed
    shutil.rmtree(tmp_path / "site" / "glossary_plugin")
    (tmp_path / "site" / "glossary_plugin.py").write_text("raise SystemExit('a stray module ran')\n")
    stray = subprocess.run([*command, "--out", "s.jsonl"], cwd=work, capture_output=True, text=True, env=env)
    assert stray.returncode == 2 and "ran" not in stray.stderr
    assert "not among the files glossary-plugin 1.0.0 installed" in stray.stderr


def test_a_plugin_whose_module_is_gone_is_told_to_reinstall_its_package(tmp_path):
    """Item 22: a plugin whose module is not installed is not told to give the folder that holds X.py."""
    env = _plugin(tmp_path)
    shutil.rmtree(tmp_path / "site" / "glossary_plugin")
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "g1", "question": "q", "answer": "a", "glossary": {}}) + "\n")
    done = subprocess.run([str(CONSOLE), "run", "q.jsonl", "--env", "glossary", "--model", "scripted:x.json", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 2 and "give the folder" not in done.stderr
    assert "plugin glossary of glossary-plugin 1.0.0 names the module glossary_plugin, which is not installed" in (
        done.stderr
    )
    assert "pip install --force-reinstall glossary-plugin" in done.stderr


def test_a_manifests_ray_address_is_joined_only_when_the_command_line_names_it(tmp_path):
    """Item 4: `run --config` of a manifest that records a Ray address does not join that cluster by itself; one
    line names the address and the flag. A TOML file the user wrote may name one (it is the user's)."""
    (tmp_path / "s.json").write_text(json.dumps([" So.\nAction 1: Finish[148]\n"]))
    done = _rawreact(tmp_path, "run", "--model", "scripted:s.json", *QUESTION, "--out", "run.jsonl", "-q")
    assert done.returncode == 0, done.stderr
    manifest = tmp_path / "run.jsonl.manifest.json"
    data = json.loads(manifest.read_text())
    data["settings"]["ray"] = "203.0.113.7:6379"  # someone else's cluster (a documentation address: nothing there)
    manifest.write_text(json.dumps(data))
    again = _rawreact(tmp_path, "run", "--config", "run.jsonl", "--out", "b.jsonl")
    assert again.returncode == 2 and "Traceback" not in again.stderr
    [line] = again.stderr.splitlines()
    assert "ran on the Ray cluster at 203.0.113.7:6379" in line and "add --ray-address 203.0.113.7:6379" in line
    assert not (tmp_path / "b.jsonl").exists()
    here = _rawreact(tmp_path, "run", "--config", "run.jsonl", "--ray-address", "127.0.0.1:1", "--out", "c.jsonl")
    assert here.returncode == 2 and "nothing answers there" in here.stderr  # the flag given: that address is joined


def test_ray_flags_that_cannot_both_hold_or_name_no_cluster_are_one_line(tmp_path):
    """Item 22: `--ray --ray-address X` is refused (neither silently wins); an address without a port, or with a
    port that is no number, is refused before Ray is touched, without advice about tokens."""
    both = _rawreact(tmp_path, "run", "--ray", "--ray-address", "127.0.0.1:6379", "--model", "scripted:x.json")
    assert both.returncode == 2 and "not allowed with argument --ray" in both.stderr
    for address in ("127.0.0.1:abc", "nohost", "ray://", ":6379", "10.0.0.5:70000"):
        done = _rawreact(tmp_path, "run", "--ray-address", address, "--model", "scripted:x.json")
        assert done.returncode == 2 and "Traceback" not in done.stderr, (address, done.stderr)
        assert "is not a cluster's address: give HOST:PORT" in done.stderr and "token" not in done.stderr, address


def test_a_folder_of_more_python_files_than_rawreact_checks_is_refused_naming_it(tmp_path):
    """Item 2: every Python file of the module's folder is checked; a folder of more than 2,000 (a home folder, a
    checkout) is refused with one line saying to give the module a folder of its own, before anything runs."""
    folder = tmp_path / "crowded"
    folder.mkdir()
    (folder / "helpers.py").write_text(
        HELPERS.replace("import sibling", "from pathlib import Path\nPath('ran').touch()")
    )
    for k in range(2001):
        (folder / f"m{k}.py").write_text("")
    done = _rawreact(folder, "run", "--model", "scripted:x.json", *QUESTION, "--env", "helpers:with_calc")
    assert done.returncode == 2 and not (folder / "ran").exists()
    [line] = done.stderr.splitlines()
    assert f"its folder {folder} holds 2002 Python files" in line and "a folder of their own" in line
