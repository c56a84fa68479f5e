"""Model backends behind one narrow interface (`base.Model.complete`), and `load_model` to pick one
by spec: llama.cpp in process (`llama`, batched by `batch`), Ollama, OpenAI-compatible servers, and
the scripted model that tests and the CLI can run on.

May import: core.
A new backend is a module here that implements `base.Model`, and one branch of `load_model`.
"""

from pathlib import Path

from rawreact.core.errors import ModelError
from rawreact.models import hub
from rawreact.models.base import Completion, Model
from rawreact.models.scripted import ScriptedModel
from rawreact.models.specs import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    LLAMA_MAX_SEQUENCES,
    SERVERS,
    STREAMS_MAX,
    is_embedded,
    model_file,
    model_path,
    model_sha256,
    sequences_problem,
)

__all__ = [
    "Completion",
    "Model",
    "ScriptedModel",
    "load_model",
    "model_path",
    "model_sha256",
    "EMBEDDED_MODELS",
    "DEFAULT_MODEL",
    "LLAMA_MAX_SEQUENCES",
    "SERVERS",
    "STREAMS_MAX",
    "check_spec",
    "is_embedded",
    "model_file",
    "sequences_problem",
]


def load_model(spec: str = DEFAULT_MODEL, **options) -> Model:
    """Load a model by spec: an embedded name, a .gguf path, `hf:ORG/REPO[@REVISION][:FILE|:TAG]` (a GGUF
    file of a Hugging Face repository, downloaded into its cache), `ollama:NAME`, `openai:[MODEL@]URL`
    (or `vllm:`/`llamacpp:` to name the server family), or `scripted:FILE.json`.

    `options` go to the backend: for llama-cpp n_ctx, temperature, seed, reuse_cache, n_threads,
    workers (the questions it decodes together), drafts and flash_attention (see `LlamaModel`);
    for Ollama host, n_ctx, temperature, seed, timeout; for servers temperature, seed, timeout,
    retries. Options a backend has no use for (n_ctx for a server) are dropped.
    """
    check_spec(spec)  # what no load could find, refused first (a run's plan calls it before any load)
    if spec.startswith("scripted:"):
        return ScriptedModel.from_file(spec.removeprefix("scripted:"))
    if options.get("timeout") is None:
        options.pop("timeout", None)
    prefix = spec.split(":", 1)[0]
    if prefix == "ollama":
        from rawreact.models.ollama import OllamaModel

        name = spec.removeprefix("ollama:")
        return OllamaModel(name, **_only(options, "host", "n_ctx", "temperature", "seed", "timeout", "client"))
    if prefix in SERVERS:
        from rawreact.models.openai import OpenAIModel, parse_spec

        family, name, url = parse_spec(spec)
        if "," in url:  # several servers of one model: a fleet
            from rawreact.models.fleet import FleetModel, parse_urls

            fleet = _only(options, "temperature", "seed", "timeout", "per_endpoint")
            return FleetModel(parse_urls(url), name, family=family, **fleet)
        return OpenAIModel(url, name, family=family, **_only(options, "temperature", "seed", "timeout", "retries"))
    options.pop("host", None)
    options.pop("timeout", None)  # an in-process model has no server to wait for
    options.pop("per_endpoint", None)
    from rawreact.models.llama import LlamaModel

    if spec in EMBEDDED_MODELS:
        return LlamaModel(model_path(spec), name=spec, **options)
    if spec.startswith(hub.PREFIX):
        return LlamaModel(hub.hub_file(spec), name=spec, **options)
    return LlamaModel(Path(spec).expanduser(), **options)  # a .gguf path (check_spec refused anything else)


def _unknown(spec: str) -> ModelError:
    known = ", ".join(EMBEDDED_MODELS)
    return ModelError(
        f"unknown model {spec!r}: use one of {known}, a path to a .gguf file, hf:ORG/REPO:FILE, ollama:NAME, "
        "openai:[MODEL@]URL (vllm:[MODEL@]URL or llamacpp:[MODEL@]URL to name the server's family), or "
        "scripted:FILE.json"
    )


def check_spec(spec: str) -> None:
    """Refuse a spec that names no model, as `load_model` would, without loading a model or asking a server:
    a run's plan checks its model this way before anything starts (`runs.plan`)."""
    prefix = spec.split(":", 1)[0]
    if spec.startswith("scripted:") or spec in EMBEDDED_MODELS or spec.startswith(hub.PREFIX):
        return  # a script is read, and an embedded or Hub model fetched, as it loads
    if prefix == "ollama":
        if not spec.removeprefix("ollama:"):
            raise ModelError("give the Ollama model's name, as in ollama:qwen2.5:3b")
        return
    if prefix in SERVERS:
        from rawreact.models.openai import parse_spec

        url = parse_spec(spec)[2]
        if "," in url:
            from rawreact.models.fleet import parse_urls

            parse_urls(url)
        return
    if spec.endswith(".gguf") or Path(spec).exists():
        path = Path(spec).expanduser()
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist; give the path of a .gguf file")
        return
    raise _unknown(spec)


def _only(options: dict, *names: str) -> dict:
    return {key: value for key, value in options.items() if key in names}
