"""What the installed llama.cpp was built to use on this CPU, and whether the embedded model's weights are
repacked for it.

llama.cpp's CPU backend can copy a model's weights at load into a layout of its own for the kernels of
this CPU ("extra buffer types": interleaved Q4 rows for AVX2, Intel AMX tiles on a CPU that has AMX).
Which kernels run decides the arithmetic, so a run records the build's features (`features`) and the
choice (`repack`), beside the library's version.

On a build with AMX (a native build on an Intel Xeon of 2023 or later), llama.cpp's AMX matrix product
crashed intermittently on this project's machine: a general protection fault at `ldtilecfg` in
`ggml_backend_amx_mul_mat`, in llama-cpp-python's own completion call as in rawreact's, killing the
process (exit 139) within a few questions. The tile configuration it loads lives on the stack, where the
compiler may drop the writes to it (llama.cpp issue 20824). Loaded without extra buffer types, the same
build ran without a fault and uses its AVX-512 kernels instead; so that is the default where the build
reports AMX (`repack=None`). Elsewhere the weights are repacked as llama.cpp does by default.

`python -m rawreact.models.build MODULE ARGS...` runs another program that loads through llama-cpp-python
(its server: `python -m rawreact.models.build llama_cpp.server --model FILE ...`) with the same default.
"""

import contextlib
import runpy
import sys
import threading
from collections.abc import Iterator

from rawreact.models.gbnf import llama_cpp_module

AMX = "AMX_INT8"  # the feature llama.cpp reports when it was built with its AMX kernels
_loading = threading.Lock()  # the defaults are swapped for one load at a time


def features(llama_cpp) -> list[str]:
    """The features the installed llama.cpp reports as on (`NAME = 1` in its system info): AVX2, REPACK, ..."""
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    found = []
    for part in info.replace(":", "|").split("|"):
        name, equals, value = part.partition("=")
        if equals and value.strip() == "1":
            found.append(name.strip())
    return found


def repack_default(found: list[str]) -> bool:
    """Whether weights are repacked when the user does not say: not on a build with AMX (see the module)."""
    return AMX not in found


def loads() -> dict:
    """How the embedded model loads when nothing says otherwise: the build's features and the repacking."""
    found = features(llama_cpp_module())
    return {"features": found, "repack": repack_default(found)}


@contextlib.contextmanager
def loading(llama_cpp, *, repack: bool | None = None) -> Iterator[None]:
    """Inside the block, llama-cpp-python's `Llama` loads weights repacked or not (None: as `loads` says).

    `Llama` has no argument for it and starts from `llama_model_default_params()`, so for the block that
    function returns llama.cpp's defaults with `use_extra_bufts` set to `repack`.
    """
    module = llama_cpp.llama_cpp
    repack = loads()["repack"] if repack is None else repack
    with _loading:
        original = module.llama_model_default_params

        def defaults():
            params = original()
            params.use_extra_bufts = repack
            return params

        module.llama_model_default_params = defaults
        try:
            yield
        finally:
            module.llama_model_default_params = original


def main(argv: list[str]) -> None:
    """Run the module `argv[0]` as `python -m` would, with `argv[1:]` as its arguments, its loads repacked as
    rawreact's are (`loads`): llama-cpp-python's server on a build with AMX then loads without AMX tiles."""
    if not argv or argv[0].startswith("-"):
        sys.exit("usage: python -m rawreact.models.build MODULE [ARGS...], e.g. llama_cpp.server --model FILE")
    module, sys.argv = argv[0], argv
    with loading(llama_cpp_module()):
        runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
