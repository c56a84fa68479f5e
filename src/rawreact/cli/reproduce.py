"""The protocol scripts' one function: run the paper's protocol on a task's data file, resuming, then report.

`scripts/reproduce_hotpotqa.py` and `scripts/reproduce_fever.py` call `reproduce`. With `--reference DIR`
(a checkout of the reference repository) the run takes the paper's whole setup from it (`paper.py`),
and says which parts are the paper's; without it, the protocol's settings alone (sampling, loop
defaults, steps), with rawreact's own prompts. `--pooled` searches every question's paragraphs pooled
in one store (built once, beside the run file), instead of each question's own ten, whose `Similar:`
lists name the gold titles (README: the distractor leak).
"""

import sys
from pathlib import Path

from rawreact.cli.app import main
from rawreact.config.paper import SAMPLE, SHUFFLE_RANGE, SHUFFLE_SEED

# The protocol without the reference checkout: both notebooks' sample and the reference loop's defaults.
_SAMPLE = ["--shuffle", "--shuffle-seed", str(SHUFFLE_SEED), "--limit", str(SAMPLE), "--n-first", "5"]
PROTOCOL = {"qa": _SAMPLE, "fever": [*_SAMPLE, "--shuffle-range", str(SHUFFLE_RANGE)]}
NAMES = {"qa": "hotpotqa", "fever": "fever"}
LOOPS_SAID = {"tolerant": "rawreact's", "reference": "the reference notebook's, byte for byte"}


def reproduce(task: str, argv: list[str], usage: str) -> int:
    """Run the protocol with `argv` (data file and options), resuming a run already started."""
    name = f"reproduce_{NAMES[task]}"
    if not argv or argv[0].startswith("-"):
        print(usage, file=sys.stderr)
        return 2
    data, options = argv[0], argv[1:]
    out, options = _take(options, "--out", f"{NAMES[task]}-500.jsonl")
    pooled = "--pooled" in options
    options = [o for o in options if o != "--pooled"]
    reference = any(o == "--reference" or o.startswith("--reference=") for o in options)
    loop = _loop(options, "reference" if reference else "tolerant")
    said = f" in the {loop} loop ({LOOPS_SAID[loop]})" if loop in LOOPS_SAID else ""
    setup = "the paper's setup (--reference)" if reference else "the reference protocol"
    print(f"{name}: {setup}{said}, into {out}", flush=True)
    if pooled:
        store = f"{out}.pooled.sqlite"
        print(f"{name}: every question's paragraphs pooled in {store}, searched instead of each question's own")
        if not Path(store).exists() and main(["index", data, "--out", store]) != 0:
            return 2
        options += ["--passages", store]
    protocol = [] if reference else PROTOCOL[task]
    # Options given after the protocol's win, so `--limit 20` makes a first, short try.
    code = main(["run", data, *protocol, *options, "--out", out, "--resume", "-q"])
    if code == 0:
        code = main(["report", out])
        print(f"{name}: ran the {loop} loop")
    return code


def _take(options: list[str], flag: str, default: str) -> tuple[str, list[str]]:
    """The value of `flag` among `options` (or `default`), and the options without it."""
    if flag in options[:-1]:
        at = options.index(flag)
        return options[at + 1], options[:at] + options[at + 2 :]
    return default, options


def _loop(options: list[str], default: str) -> str:
    """The loop the options choose (the last --loop wins, as in the command line)."""
    loop = default
    for k, option in enumerate(options):
        if option == "--loop" and k + 1 < len(options):
            loop = options[k + 1]
        elif option.startswith("--loop="):
            loop = option.partition("=")[2]
    return loop  # `rawreact run` refuses a loop it does not know
