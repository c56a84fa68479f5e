"""Run the ReAct paper's HotpotQA protocol on your model and data, then print its summary.

The protocol of the reference notebook: the dev set's question indices shuffled with
`random.Random(233)`, the first 500 of them, at most 7 steps per question, and searches that show a
passage's first 5 sentences, as the reference's Wikipedia environment does. The run resumes if it
was interrupted: run the same command again.

    python scripts/reproduce_hotpotqa.py hotpot_dev_distractor_v1.json --model my-model.gguf \\
        --out hotpotqa-500.jsonl [any other `rawreact run` option, such as --grammar or --prompt]

Options you give override the protocol's (`--limit 20` makes a short first try).

`--loop reference` runs the reference notebook's own loop and environment, byte for byte (see
docs/reference.md); `--loop tolerant`, the default, runs rawreact's. The output says which ran.

Differences that remain: the reference searched live Wikipedia, rawreact searches each question's
own paragraphs (the distractor setting); and the reference's prompt and instruction are not
shipped, so pass your copy with `--prompt prompts_naive.json --key webthink_simple6
--instruction FILE` to use them.
"""

import sys

from rawreact.cli import main

PROTOCOL = ["--shuffle", "--shuffle-seed", "233", "--limit", "500", "--max-steps", "7", "--n-first", "5"]


def reproduce(argv: list[str]) -> int:
    """Run the protocol with `argv` (data file and options), resuming a run already started."""
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    data, options, out = argv[0], argv[1:], "hotpotqa-500.jsonl"
    if "--out" in options[:-1]:
        at = options.index("--out")
        out, options = options[at + 1], options[:at] + options[at + 2 :]
    loop = _loop(options)
    said = f" in the {loop} loop ({LOOPS_SAID[loop]})" if loop in LOOPS_SAID else ""
    print(f"reproduce_hotpotqa: the reference protocol{said}, into {out}", flush=True)
    # Options given after the protocol's win, so `--limit 20` makes a first, short try.
    code = main(["run", data, *PROTOCOL, *options, "--out", out, "--resume", "-q"])
    if code == 0:
        code = main(["report", out])
        print(f"reproduce_hotpotqa: ran the {loop} loop")
    return code


LOOPS_SAID = {"tolerant": "rawreact's", "reference": "the reference notebook's, byte for byte"}


def _loop(options: list[str]) -> str:
    """The loop the options choose (the last --loop wins, as in the command line), tolerant by default."""
    loop = "tolerant"
    for k, option in enumerate(options):
        if option == "--loop" and k + 1 < len(options):
            loop = options[k + 1]
        elif option.startswith("--loop="):
            loop = option.partition("=")[2]
    return loop  # `rawreact run` refuses a loop it does not know


if __name__ == "__main__":
    sys.exit(reproduce(sys.argv[1:]))
