"""The llama.cpp build a run decodes with: its CPU features, and whether the embedded model's weights are
repacked for them (models.build). llama.cpp's AMX kernels crash, so a build with AMX loads without repacking."""

import os
import subprocess
import sys

import pytest

from rawreact.core.errors import ModelError
from rawreact.models import build
from rawreact.models.cache import identity
from rawreact.models.gbnf import _captured_output, llama_cpp_module
from rawreact.models.llama import LlamaModel
from rawreact.models.specs import model_path

llama_cpp = llama_cpp_module()
PROMPT = "Question: Which river flows through the city of Orlo?\nThought 1:"


class Reporting:
    """A llama_cpp stand-in that reports `info` as its system info, for the parser alone."""

    def __init__(self, info: bytes) -> None:
        self.info = info

    def llama_print_system_info(self) -> bytes:
        return self.info


def test_the_features_are_the_names_a_build_reports_on():
    info = b"CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 0 | AMX_INT8 = 1 | REPACK = 1 | Metal : EMBED_LIBRARY = 1 | "
    assert build.features(Reporting(info)) == ["SSE3", "AVX2", "AMX_INT8", "REPACK", "EMBED_LIBRARY"]
    assert build.features(Reporting(b"")) == []
    assert build.repack_default(["AVX2", "REPACK"]) is True
    assert build.repack_default(["AVX512", "AMX_INT8", "REPACK"]) is False  # its AMX kernels crash
    installed = build.features(llama_cpp)
    assert installed and "CPU" not in installed and all(" " not in name for name in installed)
    assert build.loads() == {"features": installed, "repack": "AMX_INT8" not in installed}


def loaded(**options) -> tuple[LlamaModel, list[str]]:
    """The embedded model, loaded while llama.cpp's log is captured, and the weight buffers the log names."""
    with _captured_output() as lines:
        model = LlamaModel(model_path("gemma3-270m"), n_ctx=1024, n_threads=1, **options)
    return model, [line for line in "".join(lines).splitlines() if "model buffer size" in line]


def test_repacking_is_a_setting_of_the_load_and_a_build_with_amx_loads_without_it(monkeypatch):
    """Issue 42, hardening: on a build with AMX llama.cpp's AMX matrix product died with a general protection
    fault within a few questions; without extra buffer types the same build ran. The real model loads with
    and without repacking (the log names the repacked buffer or not), writes text either way, and a build
    that reports AMX_INT8 (its system info changed here) loads without it unless asked."""
    default, buffers = loaded()
    assert default.repack is ("AMX_INT8" not in default.build)
    assert default.build == build.features(llama_cpp)
    plain, plain_buffers = loaded(repack=False)
    assert plain.repack is False and not any("REPACK" in line for line in plain_buffers) and plain_buffers
    if "REPACK" in default.build and default.repack:  # this build repacks some of Gemma's Q4_K weights
        assert any("CPU_REPACK model buffer" in line for line in buffers), buffers
    # the defaults are llama.cpp's again after each load
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is True
    options = {"stop": ["\nObservation 1:"], "max_tokens": 16}
    assert plain.complete(PROMPT, **options).text.strip()
    info = llama_cpp.llama_print_system_info()
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: info + b"AMX_INT8 = 1 | ")
    amx, amx_buffers = loaded()
    assert "AMX_INT8" in amx.build and amx.repack is False
    assert not any("REPACK" in line or "AMX" in line for line in amx_buffers)
    asked, asked_buffers = loaded(repack=True)
    # repacked for this build's kernels: CPU_REPACK on AVX2, AMX tiles (213.9 MB of Gemma) on a native build with AMX
    extra = ("AMX model buffer", "CPU_REPACK model buffer")
    assert asked.repack is True and (
        any(name in line for line in asked_buffers for name in extra) or "REPACK" not in asked.build
    )
    # the cache's key tells the loads apart: their arithmetic may differ
    assert identity(plain)["repack"] is False and identity(default)["repack"] is default.repack
    assert identity(amx)["build"] == amx.build != identity(plain)["build"]
    for model in (default, plain, amx, asked):
        model.llm.close()


@pytest.mark.parametrize("value", ["yes", 1])
def test_a_bad_repack_value_is_one_line(value):
    with pytest.raises(ModelError, match=f"repack must be True, False or None .*not {value!r}"):
        LlamaModel(model_path("gemma3-270m"), repack=value)


def test_another_program_runs_with_rawreacts_load(tmp_path, monkeypatch, capsys):
    """`python -m rawreact.models.build MODULE ARGS` (how the tests start llama-cpp-python's server) runs the
    module as `python -m` would, with its arguments, while llama.cpp's defaults repack as rawreact's loads do:
    here as on a build with AMX (`loads` says no repacking), where llama.cpp's own default would repack."""
    (tmp_path / "shows.py").write_text(
        "import sys, llama_cpp\nprint(sys.argv[1:], llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(build, "loads", lambda: {"features": ["AVX2", "AMX_INT8"], "repack": False})
    build.main(["shows", "--model", "x y"])
    assert capsys.readouterr().out.strip() == "['--model', 'x y'] False"
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is True  # restored after
    command = [sys.executable, "-m", "rawreact.models.build"]
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([*command, "shows", "-v"], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == f"['-v'] {'AMX_INT8' not in build.features(llama_cpp)}"
    bare = subprocess.run(command, capture_output=True, text=True, env=env)
    assert bare.returncode != 0 and "usage: python -m rawreact.models.build MODULE" in bare.stderr
    assert "Traceback" not in bare.stderr
