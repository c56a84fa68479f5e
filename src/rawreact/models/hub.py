"""GGUF models from the Hugging Face Hub: the spec `hf:ORG/REPO[@REVISION][:FILE|:TAG]`.

The repository's files are listed, one .gguf is chosen (a file name, or a quantisation tag such as
`Q4_K_M` that one file's name holds, or the only .gguf there is), and `huggingface_hub` downloads it
into its own cache (`HF_HOME`, `~/.cache/huggingface/hub`), as llama-cpp-python's `Llama.from_pretrained`
does; a model split into parts (`-00001-of-00003.gguf`) is downloaded whole and read from its first part.
Offline (no network, or `HF_HUB_OFFLINE=1`), a model downloaded before is taken from the cache, and one
that is not there is a clear error. `HF_ENDPOINT` points the client at a mirror, as it does for every
Hugging Face tool.
"""

import fnmatch
import os
import re
import socket
import urllib.parse
from pathlib import Path

from rawreact.core.errors import ModelError

PREFIX = "hf:"
INSTALL = "pip install huggingface_hub (or pip install 'rawreact[hf]')"
_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)  # llama.cpp's split files
_RESOLVED: dict[str, Path] = {}  # spec -> file, so that a process lists and checks a repository once


def parse_hub_spec(spec: str) -> tuple[str, str | None, str | None]:
    """`hf:ORG/REPO[@REVISION][:FILE|:TAG]` as (repository, revision, file or tag), or a clear error."""
    rest = spec.removeprefix(PREFIX)
    repo, _, choice = rest.partition(":")
    repo, _, revision = repo.partition("@")
    if repo.count("/") != 1 or not all(repo.split("/")) or any(c.isspace() for c in repo):
        raise ModelError(
            f"model {spec!r}: name a Hugging Face repository as hf:ORG/REPO, then optionally @REVISION and :FILE "
            "or :TAG, as in hf:ggml-org/gemma-3-270m-GGUF:Q8_0"
        )
    return repo, revision or None, choice or None


def hub_file(spec: str) -> Path:
    """The local .gguf file behind an `hf:` spec, downloaded into the Hugging Face cache when not there."""
    if spec not in _RESOLVED:
        _RESOLVED[spec] = _download(spec)
    return _RESOLVED[spec]


def _download(spec: str) -> Path:
    repo, revision, choice = parse_hub_spec(spec)
    try:
        import huggingface_hub
        from huggingface_hub import constants
    except ImportError:
        raise ModelError(
            f"model {spec!r} is on the Hugging Face Hub, and reading it needs huggingface_hub: {INSTALL}"
        ) from None
    # HF_ENDPOINT as it is now: the client reads it once, when it is first imported.
    endpoint = os.environ.get("HF_ENDPOINT", "").rstrip("/") or constants.ENDPOINT
    where = f"{endpoint} (HF_ENDPOINT)"
    files, problem = None, "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else None
    if problem is None and not _reachable(endpoint):
        problem = f"the Hub at {where} could not be reached"
    if problem is None:
        try:
            files = huggingface_hub.HfApi(endpoint=endpoint).list_repo_files(repo, revision=revision)
        except Exception as error:  # noqa: BLE001 (the client's errors differ between its versions)
            problem = _hub_problem(spec, repo, revision, error, where)
    cached = files is None  # offline, or the Hub was not reached: what the cache holds of this repository
    if cached:
        files = _cached_files(repo, revision)
        if files is None:
            raise ModelError(
                f"model {spec!r}: {problem}, and the Hugging Face cache ({constants.HF_HUB_CACHE}) does not hold "
                f"{repo}; connect to the Hub once (or set HF_ENDPOINT to a mirror), or give a local .gguf path"
            )
    names = _chosen(spec, repo, files, choice)
    paths = []
    for name in names:
        try:
            paths.append(
                Path(
                    huggingface_hub.hf_hub_download(
                        repo, name, revision=revision, local_files_only=cached, endpoint=endpoint
                    )
                )
            )
        except Exception as error:  # noqa: BLE001
            raise ModelError(f"model {spec!r}: could not download {name}: {_first_line(error)}") from None
    return paths[0]


def _hub_problem(spec: str, repo: str, revision: str | None, error: Exception, where: str) -> str:
    """Why listing the repository failed: a refusal that no cache can mend is raised, the rest returned."""
    kind = type(error).__name__
    if kind == "RepositoryNotFoundError":
        raise ModelError(
            f"model {spec!r}: {where} has no repository {repo} (or it is private: log in with "
            "`hf auth login` or set HF_TOKEN)"
        ) from None
    if kind == "GatedRepoError":
        raise ModelError(
            f"model {spec!r}: {repo} is gated; accept its terms on the Hub, then set HF_TOKEN or log in"
        ) from None
    if kind == "RevisionNotFoundError":
        raise ModelError(f"model {spec!r}: {repo} has no revision {revision!r}") from None
    return f"the Hub at {where} could not be reached ({_first_line(error)})"


def _reachable(endpoint: str, seconds: float = 5.0) -> bool:
    """Whether the endpoint's host takes a connection (through a proxy, when one is set, the client's
    own retries decide): the client would otherwise retry an unreachable Hub for about 20 s."""
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")):
        return True
    url = urllib.parse.urlsplit(endpoint)
    try:
        with socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), seconds):
            return True
    except OSError:
        return False


def _cached_files(repo: str, revision: str | None) -> list[str] | None:
    """The files of the repository's snapshot in the local cache, or None when there is none."""
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(repo, revision=revision, local_files_only=True))
    except Exception:  # noqa: BLE001 (not cached)
        return None
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _chosen(spec: str, repo: str, files: list[str], choice: str | None) -> list[str]:
    """The .gguf files a spec names (all parts of a split model, first part first), or a clear error."""
    ggufs = sorted(f for f in files if f.lower().endswith(".gguf"))
    if not ggufs:
        raise ModelError(f"model {spec!r}: {repo} holds no .gguf file")
    if choice is None:
        found = ggufs
    elif choice.lower().endswith(".gguf") or any(c in choice for c in "*?["):
        found = [f for f in ggufs if fnmatch.fnmatch(f, choice) or fnmatch.fnmatch(f.rsplit("/", 1)[-1], choice)]
    else:  # a quantisation tag, as in Q4_K_M: a whole part of a file's name (Q4_K is not Q4_K_M's)
        tag = re.compile(rf"(^|[-.]){re.escape(choice)}([-.]|$)", re.IGNORECASE)
        found = [f for f in ggufs if tag.search(f.rsplit("/", 1)[-1])]
    models = sorted({_PART.sub(".gguf", f) for f in found})
    if len(models) != 1:
        listed = ", ".join(sorted({_PART.sub(".gguf", f) for f in ggufs}))
        what = "several" if models else "no"
        hint = "add :FILE or :TAG" if choice is None else "name one of them"
        raise ModelError(f"model {spec!r}: {what} .gguf files of {repo} match; {hint} (it holds {listed})")
    return sorted(found) if _PART.search(found[0]) else found[:1]


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
