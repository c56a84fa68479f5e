"""The protocol scripts' one function: run the paper's protocol on a task's data file, resuming, then report.

`scripts/reproduce_hotpotqa.py` and `scripts/reproduce_fever.py` call `reproduce`. With `--reference DIR`
(a checkout of the reference repository) the run takes the paper's whole setup from it (`paper.py`),
and says which parts are the paper's; without it, the protocol's settings alone (sampling, loop
defaults, steps), with rawreact's own prompts. `--pooled` searches every question's paragraphs pooled
in one store (built once, beside the run file), instead of each question's own ten, whose `Similar:`
lists name the gold titles (docs/paper.md: the distractor leak).
"""

import hashlib
import sys
from pathlib import Path

from rawreact.cli.app import main
from rawreact.cli.parser import parser
from rawreact.config.paper import SAMPLE, SHUFFLE_RANGE, SHUFFLE_SEED
from rawreact.core.errors import DataError
from rawreact.core.tasks import task_type

# The protocol without the reference checkout: both notebooks' sample and the reference loop's defaults.
_SAMPLE = ["--shuffle", "--shuffle-seed", str(SHUFFLE_SEED), "--limit", str(SAMPLE), "--n-first", "5"]
LOOPS_SAID = {"tolerant": "rawreact's", "reference": "the reference notebook's, byte for byte"}


def reproduce(task: str, argv: list[str], usage: str) -> int:
    """Run the protocol with `argv` (data file and options), resuming a run already started."""
    declared = task_type(task)  # its benchmark's name, and whether the protocol shuffles over range(7405)
    name = f"reproduce_{declared.benchmark}"
    if not argv or argv[0].startswith("-"):
        print(usage, file=sys.stderr)
        return 2
    pooled = "--pooled" in argv
    options = [o for o in argv if o != "--pooled"]
    try:  # read as `rawreact run` reads them, so --out=FILE, --loop=reference and the rest mean what they say
        args = parser().parse_args(["run", *options])
    except SystemExit as exit:  # argparse has said what is wrong, with the usage
        return exit.code if isinstance(exit.code, int) else 2
    data, out = args.data, args.out or f"{declared.benchmark}-500.jsonl"
    reference = args.reference is not None
    loop = args.loop or ("reference" if reference else "tolerant")
    said = f" in the {loop} loop ({LOOPS_SAID[loop]})" if loop in LOOPS_SAID else ""
    setup = "the paper's setup (--reference)" if reference else "the reference protocol"
    print(f"{name}: {setup}{said}, into {out}", flush=True)
    if pooled:
        store = f"{out}.pooled.sqlite"
        print(f"{name}: every question's paragraphs pooled in {store}, searched instead of each question's own")
        stale = _stale(store, data) if Path(store).exists() else None
        if stale:
            print(f"{name}: {store} {stale}; building it again from {data}", flush=True)
        if (stale or not Path(store).exists()) and main(["index", data, "--out", store, "--force"]) != 0:
            return 2
        options += ["--passages", store]
    ranged = ["--shuffle-range", str(SHUFFLE_RANGE)] if declared.reference.shuffle_range else []
    protocol = [] if reference else [*_SAMPLE, *ranged]
    # Options given after the protocol's win, so `--limit 20` makes a first, short try; the last --out wins.
    code = main(["run", data, *protocol, *options[1:], "--out", out, "--resume", "-q"])
    if code == 0:
        code = main(["report", out])
        print(f"{name}: ran the {loop} loop")
    return code


def _stale(store: str, data: str) -> str | None:
    """Why the pooled store `store` is not the one `data` makes (what it says it was built from differs from
    the file's SHA-256, or it cannot be read), or None when it is."""
    from rawreact.environments.store import PassageStore

    try:
        sources = PassageStore(store).info.get("sources")
    except DataError as error:
        return f"cannot be used ({error})"
    try:
        digest = hashlib.sha256(Path(data).read_bytes()).hexdigest()
    except OSError:
        return None  # `rawreact run` names the missing data file
    built = [source.get("sha256") for source in sources] if isinstance(sources, list) else []
    if built != [digest]:
        return f"was built from other data (sha256 {', '.join(map(str, built)) or 'none'}, not {digest})"
    return None
